"""Which models the eviction runtime runs exactly, decided by behaviour, not by name.

A model is supported when every layer's attention goes through transformers' attention interface
(so evolalloc's attention function replaces it) and passes only arguments that function
implements. The runtime implements:

* causal softmax attention with the ``scaling`` the module passes (``1/sqrt(head_dim)``, Gemma's
  ``query_pre_attn_scalar ** -0.5``, ...), grouped-query attention;
* ``sliding_window=W`` per layer, with the stock models' semantics: a query at position ``p``
  sees keys at positions ``p - W < j <= p`` (``runtime/sliding.py``), by *original* position,
  also on an evicted cache;
* ``softcap=s``: logits ``s * tanh(logits / s)`` before the mask (Gemma 2);
* whatever the module does before calling attention (q/k norms as in Qwen3 and Gemma 3, fused
  qkv projections as in Phi-3, rope scaling, per-layer-type rope bases): the function receives
  post-norm, post-rope queries and keys.

Two checks, one cheap and one exact:

* ``attention_support(config)``: from the config alone (no weights), refuses what the runtime
  does not implement (layer types other than full and sliding attention, MLA, chunked or
  bidirectional attention, per-layer KV-head counts or head sizes, encoder-decoders);
* ``probe_attention(model)``: one forward of four tokens through evolalloc's attention function
  counts the layers that call it and the arguments they pass: a layer that does not call it
  (a linear-attention layer) or an argument it does not implement (learned per-head sinks,
  ``s_aux``) refuses the model. ``load_model`` and ``evolalloc.generate`` run both; the
  attention function itself refuses unknown arguments too, so nothing runs silently wrong.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass

# Arguments transformers' attention modules pass that evolalloc's attention function implements,
# or that carry nothing the result depends on (bookkeeping). Any other argument with a value
# that is not None refuses the call.
IMPLEMENTED_ARGUMENTS = frozenset({"sliding_window", "softcap"})
BOOKKEEPING_ARGUMENTS = frozenset({
    "position_ids", "use_cache", "cache_position", "output_attentions", "past_key_values", "is_causal",
    "position_embeddings", "attention_mask", "dropout", "scaling", "token_type_ids",
    "output_router_logits",  # mixture-of-experts bookkeeping passed down with the layer kwargs
    "evolalloc_cache", "evolalloc_capture", "evolalloc_windows", "evolalloc_keep_bias",
})
ATTENTION_LAYER_TYPES = ("full_attention", "sliding_attention")
# Config fields that mean an attention the runtime does not implement, and how to say so.
_UNSUPPORTED_FIELDS = {
    "kv_lora_rank": "multi-head latent attention (MLA: a compressed KV projection)",
    "q_lora_rank": "multi-head latent attention (MLA)",
    "attention_chunk_size": "chunked local attention",
    "linear_num_value_heads": "linear-attention layers",
    "ssm_state_size": "state-space (Mamba) layers",
    "mamba_d_state": "state-space (Mamba) layers",
    "num_kv_shared_layers": "layers that reuse another layer's KV cache",
}


# Layers that called evolalloc's attention inside ``count_attention_calls`` (the probe below).
_CALLS: contextvars.ContextVar = contextvars.ContextVar("evolalloc_attention_calls", default=None)


def note_attention_call(layer: int) -> None:
    """Called by evolalloc's attention function for every layer it serves."""
    calls = _CALLS.get()
    if calls is not None:
        calls.add(layer)


@contextlib.contextmanager
def count_attention_calls():
    """Within this block, collect the ``layer_idx`` of every layer that calls evolalloc's attention."""
    calls: set[int] = set()
    token = _CALLS.set(calls)
    try:
        yield calls
    finally:
        _CALLS.reset(token)


class UnsupportedAttention(ValueError):
    """A model whose attention the runtime does not implement; the message names what is missing."""


@dataclass(frozen=True)
class Support:
    """The verdict on one model: ``supported``, the one-line ``reason`` when not, and the attention
    ``features`` found (e.g. ``('sliding_window', 'softcap', 'qk_norm')``)."""

    model_type: str
    supported: bool
    reason: str
    features: tuple[str, ...]


def text_config(config):
    """The language model's config of a multimodal wrapper (Gemma 3's ``text_config``), else ``config``."""
    inner = getattr(config, "text_config", None)
    return inner if inner is not None and getattr(inner, "num_hidden_layers", None) else config


def layer_types(config) -> list[str]:
    """Each layer's attention type: ``config.layer_types`` where given, else derived from
    ``sliding_window`` (Mistral and Phi-3 slide every layer when it is set)."""
    config = text_config(config)
    declared = getattr(config, "layer_types", None)
    if declared:
        return list(declared)
    sliding = getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True)
    return ["sliding_attention" if sliding else "full_attention"] * config.num_hidden_layers


def sliding_windows(config) -> list[int | None]:
    """Each layer's sliding window (``None``: full attention)."""
    config = text_config(config)
    window = getattr(config, "sliding_window", None)
    return [int(window) if kind == "sliding_attention" and window else None for kind in layer_types(config)]


def attention_support(config) -> Support:
    """The config-level verdict (no weights): see the module docstring for what is refused."""
    model_type = getattr(config, "model_type", "?")
    config = text_config(config)
    features = _features(config)

    def refuse(reason: str) -> Support:
        return Support(model_type, False, reason, features)

    if getattr(config, "is_encoder_decoder", False):
        return refuse("encoder-decoder models are not supported: the runtime evicts a decoder's self-attention cache")
    for name, what in _UNSUPPORTED_FIELDS.items():
        if getattr(config, name, None):
            return refuse(f"{what} ({name}={getattr(config, name)}): not implemented by the eviction runtime")
    other = sorted(set(layer_types(config)) - set(ATTENTION_LAYER_TYPES))
    if other:
        return refuse(f"layer types {', '.join(other)} are not implemented (only {', '.join(ATTENTION_LAYER_TYPES)})")
    if getattr(config, "use_bidirectional_attention", False):
        return refuse("bidirectional attention is not implemented: the runtime decodes causally")
    shapes = layer_kv_shapes(config)
    if len(set(shapes)) > 1:
        kinds = ", ".join(f"{heads} KV heads x {dim}" for heads, dim in sorted(set(shapes)))
        return refuse(f"layers of different KV-head counts or head sizes ({kinds}): evolalloc's caches and "
                      "allocations are one rectangle of layers x KV heads for now")
    if getattr(config, "attention_k_eq_v", False):
        return refuse("keys shared with values (attention_k_eq_v): not implemented by the eviction runtime")
    return Support(model_type, True, "", features)


def layer_kv_shapes(config) -> list[tuple[int, int]]:
    """Per layer ``(KV heads, head size)``; per-layer overrides (Gemma 4's ``per_layer_config``:
    global layers with other head counts and sizes) included."""
    config = text_config(config)
    per_layer = getattr(config, "per_layer_config", None)
    layers = [per_layer[i] for i in range(config.num_hidden_layers)] if per_layer is not None else [config]
    shapes = []
    for layer in layers:  # transformers refuses the global value of a per-layer field: read each layer's
        heads = getattr(layer, "num_key_value_heads", None) or layer.num_attention_heads
        shapes.append((int(heads),
                       int(getattr(layer, "head_dim", None) or layer.hidden_size // layer.num_attention_heads)))
    return shapes if per_layer is not None else shapes * config.num_hidden_layers


def _features(config) -> tuple[str, ...]:
    found = []
    if "sliding_attention" in layer_types(config):
        found.append("sliding_window")
    if getattr(config, "attn_logit_softcapping", None):
        found.append("softcap")
    if getattr(config, "final_logit_softcapping", None):
        found.append("final_softcap")
    # Reported for the families known to normalise q/k before rope; the runtime needs no flag for
    # it (the attention function receives post-norm queries and keys whatever the family).
    if getattr(config, "model_type", "").startswith(("qwen3", "gemma3", "olmo2")) or getattr(config, "qk_norm", False):
        found.append("qk_norm")
    if getattr(config, "query_pre_attn_scalar", None):
        found.append("query_pre_attn_scalar")
    rope = getattr(config, "rope_scaling", None) or getattr(config, "rope_parameters", None)
    if isinstance(rope, dict) and rope.get("rope_type", rope.get("type")) not in (None, "default"):
        found.append(f"rope_{rope.get('rope_type', rope.get('type'))}")
    return tuple(found)


def check_attention_arguments(kwargs: dict) -> None:
    """Refuse an attention call with an argument evolalloc's function does not implement."""
    unknown = sorted(k for k, v in kwargs.items()
                     if v is not None and k not in IMPLEMENTED_ARGUMENTS and k not in BOOKKEEPING_ARGUMENTS)
    if unknown:
        raise UnsupportedAttention(
            f"the model's attention passes {', '.join(unknown)}, which evolalloc's attention does not implement "
            "(e.g. learned per-head sinks): refusing rather than computing something else")


def probe_attention(model) -> None:
    """One forward of four tokens: every layer must call evolalloc's attention with arguments it
    implements. Raises ``UnsupportedAttention`` naming what is missing."""
    import torch

    config = text_config(model.config)
    device = next(model.parameters()).device
    ids = torch.arange(1, 5, device=device)[None]
    with torch.no_grad(), count_attention_calls() as calls:
        model(input_ids=ids, use_cache=False)
    missing = sorted(set(range(config.num_hidden_layers)) - set(calls))
    if missing:
        raise UnsupportedAttention(
            f"layers {_ranges(missing)} of {config.num_hidden_layers} do not call transformers' attention interface "
            "(linear attention or a custom kernel): the eviction runtime cannot compress them")


def _ranges(numbers: list[int]) -> str:
    return ", ".join(str(n) for n in numbers[:8]) + (" ..." if len(numbers) > 8 else "")
