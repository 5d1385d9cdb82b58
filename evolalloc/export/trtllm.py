"""``trtllm``: TensorRT-LLM's ``KvCacheConfig`` (``max_attention_window`` per layer, ``sink_token_length``).

What TensorRT-LLM does with it (its docs, "Sliding Window Attention, Cyclic (Rolling Buffer) KV
Cache" and "StreamingLLM" in ``docs/source/advanced/gpt-attention.md``; ``KvCacheConfig`` in
``tensorrt_llm/llmapi/llm_args.py``): layer ``l`` keeps the last ``max_attention_window[l]``
tokens in a circular buffer (a list shorter than the layers is repeated); when the prompt is
longer than the window, the **context phase already uses sliding-window attention**, and during
generation each token attends to the last ``W`` tokens. With ``sink_token_length = S`` (the
StreamingLLM mode of the TensorRT engine path) the first ``S`` tokens always stay, the context
phase is dense, and positions are re-encoded within the cache.

So when does evolalloc's evaluation match it?

- scorer ``window`` (per-layer sliding-window attention in the prefill and while decoding,
  ``runtime/windowed.py``), layer granularity: **exact**, ``sink_token_length`` 0. Search a
  profile for TensorRT-LLM with ``scorer: window``.
- scorer ``streaming`` (sinks + recent after a *dense* prefill): the kept tokens and the dense
  context match the StreamingLLM mode, but evolalloc keeps each token's original position where
  TensorRT-LLM re-encodes positions inside the cache, so answers can differ: **approximate**
  (``exact: false`` in the export). TensorRT-LLM's PyTorch backend also no longer takes sinks.
- anything else is refused: head granularity (one window per layer there), query-aware scorers
  (SnapKV, TOVA, H2O choose tokens by attention; TensorRT-LLM keeps recent tokens only), and
  other query-free rankings (key norm, learned, ...) for the same reason.

Loading the export (TensorRT-LLM's LLM API; not run on this CPU-only machine)::

    import json
    from tensorrt_llm import LLM
    from tensorrt_llm.llmapi import KvCacheConfig

    profile = json.load(open("allocation-c128.trtllm.json"))
    llm = LLM(model="HuggingFaceTB/SmolLM2-135M-Instruct",
              kv_cache_config=KvCacheConfig(**profile["kv_cache_config"]))
"""

from __future__ import annotations

import json

from evolalloc.core.allocation import Allocation
from evolalloc.export import register_exporter
from evolalloc.export.base import Exporter, Rendered

TRTLLM_FORMAT = "evolalloc.trtllm"
QUERY_AWARE = ("snapkv", "tova", "h2o")


@register_exporter("trtllm", description="TensorRT-LLM KvCacheConfig: max_attention_window per layer")
class TrtllmExporter(Exporter):
    suffix = ".trtllm.json"

    def __init__(self, sink_tokens: int | None = None):
        if sink_tokens is not None and sink_tokens < 0:
            raise ValueError(f"sink_tokens must be >= 0, got {sink_tokens}")
        self.sink_tokens = sink_tokens

    def check(self, allocation: Allocation) -> None:
        if allocation.granularity == "head":
            raise self.refuse("the profile gives KV heads of a layer different budgets; "
                              "TensorRT-LLM's max_attention_window has one window per layer")
        if allocation.scorer in QUERY_AWARE:
            raise self.refuse(f"scorer {allocation.scorer!r} keeps the tokens "
                              "the queries attend to; TensorRT-LLM keeps "
                              "the most recent tokens (+ sinks) only: search "
                              "with scorer 'window' for its exact semantics")
        if allocation.scorer not in ("window", "streaming"):
            raise self.refuse(f"scorer {allocation.scorer!r} ranks tokens by "
                              "its own score; TensorRT-LLM keeps the most "
                              "recent tokens (+ sinks) only: search with scorer 'window' for its exact semantics")
        searched_sinks = int(allocation.scorer_params.get("sinks", 4 if allocation.scorer == "streaming" else 0))
        if self.sink_tokens is not None and self.sink_tokens != searched_sinks:
            raise self.refuse(f"the profile was searched with {searched_sinks} sink tokens, not {self.sink_tokens}")

    def render(self, allocation: Allocation) -> Rendered:
        self.check(allocation)
        # The model's own sliding window stays where it is smaller than the profile's (Gemma).
        model_windows = allocation.geometry.windows or [None] * allocation.geometry.num_layers
        windows = [int(b) if w is None else min(int(b), int(w))
                   for b, w in zip(allocation.budgets[:, 0], model_windows)]
        sinks = int(allocation.scorer_params.get("sinks", 4)) if allocation.scorer == "streaming" else 0
        exact = allocation.scorer == "window"
        document = {
            "format": TRTLLM_FORMAT,
            "version": 1,
            "model": allocation.model,
            "scorer": allocation.scorer,
            "target": allocation.target,
            "num_layers": allocation.geometry.num_layers,
            "kv_cache_config": {"max_attention_window": windows, "sink_token_length": sinks or None},
            "exact": exact,
            "semantics": (
                "per-layer sliding-window attention in the context and generation phases (cyclic KV cache), "
                "as evolalloc's 'window' scorer evaluated it"
                if exact else
                "StreamingLLM: dense context phase, sinks + recent tokens kept; TensorRT-LLM re-encodes positions "
                "within the cache, evolalloc kept original positions, so answers may differ"
            ),
            "note": "TensorRT-LLM sizes the KV cache memory from the "
                    "largest window unless its variable-window pools apply",
        }
        return Rendered(json.dumps(document, indent=2) + "\n", self.suffix)
