"""``kvpress-decoding``: a profile held while decoding, as kvpress's decoding presses hold it, or a refusal.

What kvpress 0.5.5 has (read from its source): ``DecodingPress(base_press, compression_interval,
target_size, hidden_states_buffer_size)`` counts each layer's decoding steps and, every
``compression_interval`` of them, cuts that layer back to ``target_size`` tokens with its base press,
the token just fed included — evolalloc's decode-time eviction (``runtime/decode_eviction.py``) at
``interval = compression_interval``. ``PrefillDecodingPress(prefilling_press, decoding_press)`` puts
the prompt-time press in front. But ``target_size`` is **one number for every layer**, and the per-layer
wrapper (``PerLayerCompressionPress``) takes prompt-time ``ScorerPress``es only (``CompressionRatioDecodingPress``
keeps a fraction of the tokens seen, again one for every layer). So kvpress holds a decode-time profile
only when every (layer, KV head) has the same budget; any other profile is refused, in one line.

The press that ranks tokens comes from the prompt-time export (``export/kvpress.py: kvpress_press``), and
none of them holds the budgets exactly as evolalloc does while decoding (``exact`` is false; checked on
the bundled model by ``benchmarks/kvpress_decoding_agreement.sh``, which prints the agreement):

* ``streaming`` -> ``StreamingLLMPress``: it scores *slots* by index (the first ``n_sink`` and the last
  ones), and ``ScorerPress.compress`` keeps the chosen slots in ``topk`` order, which scrambles them on
  ties; from the first compression on, slot order is no longer token order, so later compressions drop
  other tokens than the oldest: it loses sinks and keeps old tokens where evolalloc keeps the sinks and
  the most recent ones (the answers can still agree: the check found them identical, the kept sets not);
* ``knorm`` -> ``KnormPress``: the same scores, but a token repeated in the prompt has the same key norm in
  the first layer (RoPE keeps norms) and kvpress breaks such ties by ``topk`` order, evolalloc by recency
  (a few first-layer tokens differ, and through them every later layer's keys);
* ``snapkv`` -> ``SnapKVPress``: under ``DecodingPress`` kvpress rotates every buffered query at the
  current step's position, pools with ``avg`` over the tokens before the window, and needs more buffered
  queries than ``window_size`` at each compression (its buffer is emptied at every compression), so the
interval must exceed the window. Loading the export (kvpress 0.5.5)::

    import json, kvpress
    doc = json.load(open("allocation-c64.kvpress-decoding.json"))["press"]
    def build(spec): return getattr(kvpress, spec["class"])(**spec["kwargs"])
    press = kvpress.PrefillDecodingPress(
        prefilling_press=build(doc["prefilling_press"]),   # its compression_ratio: for context_length
        decoding_press=kvpress.DecodingPress(base_press=build(doc["decoding_press"]["base_press"]),
                                             **doc["decoding_press"]["kwargs"]))
    with press(model):
        ...  # prefill the prompt, then decode with explicit position_ids (kvpress's pipeline does)
"""

from __future__ import annotations

import json

import numpy as np

from evolalloc.core.allocation import Allocation
from evolalloc.export import register_exporter
from evolalloc.export.base import Exporter, Rendered
from evolalloc.export.kvpress import _check_length, compression_ratios, kvpress_press

KVPRESS_DECODING_FORMAT = "evolalloc.kvpress-decoding"
# How each press departs from evolalloc's decode-time eviction (the module docstring has the measurements).
DECODING_DIFFERENCES = {
    "streaming": "kvpress keeps the chosen slots in top-k order and StreamingLLMPress scores slots by index, so after "
                 "its first compression it no longer drops the oldest tokens",
    "knorm": "ties (a repeated token's key norm in the first layer) are broken by kvpress's top-k order, by recency "
             "in evolalloc",
    "snapkv": "under DecodingPress kvpress rotates every buffered query at the current step's position (evolalloc: "
              "each at its own)",
}


def kvpress_decoding(allocation: Allocation, context_length: int | None = None) -> dict:
    """The document: the budget, the interval and the presses (class names and keyword arguments)."""
    budget = int(allocation.capped_budgets()[0, 0])
    press = kvpress_press(allocation)
    base = {"class": press["class"], "kwargs": dict(press["kwargs"])}
    differences = list(press["differences"])
    buffer = allocation.decode.interval if allocation.scorer == "snapkv" else 0  # hidden states only SnapKV reads
    differences.append(DECODING_DIFFERENCES[allocation.scorer])
    ratio = None if context_length is None else compression_ratios([budget], context_length)[0]
    return {
        "format": KVPRESS_DECODING_FORMAT,
        "version": 1,
        "model": allocation.model,
        "method": allocation.provenance.get("method"),
        "scorer": allocation.scorer,
        "scorer_params": allocation.scorer_params,
        "target": allocation.target,
        "budget": budget,
        "decode_interval": allocation.decode.interval,
        "context_length": context_length,
        "exact": not differences,
        "differences": differences,
        "press": {
            "class": "PrefillDecodingPress",
            "prefilling_press": {"class": base["class"], "kwargs": {**base["kwargs"], "compression_ratio": ratio}},
            "decoding_press": {"class": "DecodingPress", "base_press": base,
                               "kwargs": {"compression_interval": allocation.decode.interval, "target_size": budget,
                                          "hidden_states_buffer_size": buffer}},
        },
    }


@register_exporter("kvpress-decoding", description="kvpress DecodingPress: a uniform profile held while decoding")
class KvpressDecodingExporter(Exporter):
    suffix = ".kvpress-decoding.json"
    holds_decode = True

    def __init__(self, context_length: int | None = None):
        if context_length is not None:
            _check_length(context_length)
        self.context_length = context_length

    def check(self, allocation: Allocation) -> None:
        if allocation.decode is None:
            raise self.refuse("this profile applies its budgets to the prompt only (no decode section); use the "
                              "kvpress format")
        budgets = allocation.capped_budgets()
        if np.any(budgets != budgets[0, 0]):
            raise self.refuse("kvpress 0.5.5 holds one target_size for every layer while decoding (DecodingPress; "
                              "PerLayerCompressionPress wraps prompt-time presses only), and this profile gives "
                              f"(layer, KV head)s budgets from {int(budgets.min())} to {int(budgets.max())}")
        press = kvpress_press(allocation)
        if press["class"] is None:
            raise self.refuse(f"kvpress has no press for evolalloc's scorer {allocation.scorer!r}")
        window = int(allocation.scorer_params.get("window", 32))
        if allocation.scorer == "snapkv" and allocation.decode.interval <= window:
            raise self.refuse(f"kvpress's SnapKVPress needs more than window_size = {window} buffered queries at "
                              f"each compression, and DecodingPress empties its buffer at every one: the decode "
                              f"interval ({allocation.decode.interval}) must exceed the window")

    def render(self, allocation: Allocation) -> Rendered:
        self.check(allocation)
        document = kvpress_decoding(allocation, self.context_length)
        return Rendered(json.dumps(document, indent=2) + "\n", self.suffix)
