"""What a model is, from its config alone (``evolalloc model check``): its architecture, the
geometry of each layer type, whether the eviction runtime implements its attention and why
(``runtime/support.py``), and what one prompt's KV cache weighs.

No weights are loaded: a HF folder's ``config.json``, or a GGUF file's metadata (its converted
copy's config when one is cached already). The verdict is ``load_model``'s, both halves of it:
``attention_support`` on the config, then ``probe_attention``'s forward of four tokens — run here
on the *meta* device, where the model has shapes but no weights and costs no memory, so the same
attention code runs with the same arguments (learned sinks, a layer that never calls the attention
interface) without reading a byte of the checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evolalloc.core.errors import UserError
from evolalloc.core.geometry import ModelGeometry
from evolalloc.runtime.bundled import bundled_model, bundled_name
from evolalloc.runtime.memory import cache_memory
from evolalloc.runtime.model import DTYPES, geometry_of, resolve_model_folder
from evolalloc.runtime.model_files import converted, gguf_cache_folder, is_gguf, read_config
from evolalloc.runtime.support import (
    Support,
    UnsupportedAttention,
    attention_support,
    layer_kv_shapes,
    layer_types,
    probe_attention,
    sliding_windows,
    text_config,
)


@dataclass(frozen=True)
class LayerGroup:
    """Layers that share one attention shape: their type, indices, heads, head size and window."""

    layer_type: str
    layers: tuple[int, ...]
    query_heads: int
    kv_heads: int
    head_dim: int
    window: int | None


@dataclass(frozen=True)
class Probe:
    """What the attention probe on the meta device found: ``ran`` (False: the meta device could not
    run this model's forward, ``note`` says why) and ``refusal`` (the one-line reason, or None)."""

    ran: bool
    refusal: str | None = None
    note: str = ""


@dataclass(frozen=True)
class ModelCard:
    """One model described from its config. ``text_type`` is the language model's type inside a
    multimodal wrapper (Gemma 3's ``gemma3_text``), else ``model_type``. ``groups`` is empty when
    the config does not describe its layers in the fields the runtime reads (an unsupported
    architecture's may not)."""

    spec: str
    model_type: str
    text_type: str
    classes: tuple[str, ...]
    support: Support
    dtype: str
    dtype_bytes: int
    max_positions: int  # 0: the config does not say
    geometry: ModelGeometry | None  # the runtime's geometry: supported models only
    groups: tuple[LayerGroup, ...]
    probe: Probe | None  # None: not run (the config was refused already)
    chat_template: bool | None  # None: not known without converting the GGUF file
    terms: str | None = None  # a bundled model's terms of use and where they are, or None

    def kv_cache_bytes(self, tokens: int) -> int:
        """Bytes of one prompt's full KV cache (keys and values) at ``tokens`` tokens: every token in
        a full-attention layer, at most what its window reaches in a sliding one (``runtime/memory.py``)."""
        geometry = self.geometry
        every = np.full((geometry.num_layers, geometry.num_kv_heads), tokens, dtype=np.int64)
        return cache_memory(every, geometry, tokens).full


def config_of(spec: str):
    """``(config, folder or None)`` of a model spec without loading its weights.

    A GGUF file is read for its metadata only (a bundled one assembled for that, then removed),
    unless its converted folder is cached already (then that folder's config, as ``load_model``
    will see it). Bad specs and unreadable files fail as ``load_model``'s do.
    """
    name = bundled_name(spec)
    if name is not None:
        bundled = bundled_model(name)
        folder = bundled.converted_folder()
        if converted(folder):
            return read_config(folder), folder
        with bundled.gguf() as gguf:
            return read_config(gguf=gguf), None
    path = Path(spec).expanduser()
    if path.is_file() and is_gguf(path):
        folder = gguf_cache_folder(path)
        return (read_config(folder), folder) if converted(folder) else (read_config(gguf=path), None)
    folder = resolve_model_folder(spec)  # a folder, or load_model's error for a bad spec
    return read_config(folder), folder


def terms_of(spec: str) -> str | None:
    """The terms of use a bundled model's weights come with, and where its package keeps them."""
    name = bundled_name(spec)
    bundled = None if name is None else bundled_model(name)
    if bundled is None or bundled.terms is None:
        return None
    return f"{bundled.license} apply to these weights: {bundled.terms_file()}"


def _has_chat_template(folder: Path | None) -> bool | None:
    if folder is None:
        return None
    if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
        return True
    settings = folder / "tokenizer_config.json"
    try:
        return bool(json.loads(settings.read_text(encoding="utf-8")).get("chat_template"))
    except (OSError, ValueError):
        return False


def layer_groups(config) -> tuple[LayerGroup, ...]:
    """The layers grouped by attention shape (type, KV heads, head size, window), in order of first
    appearance; read per layer from the config, so a model whose layer types differ in shape (and
    is refused for it) shows each shape."""
    text = text_config(config)
    query_heads = int(text.num_attention_heads)
    shapes: dict[tuple, list[int]] = {}
    rows = zip(layer_types(config), layer_kv_shapes(config), sliding_windows(config))
    for layer, (kind, (kv_heads, head_dim), window) in enumerate(rows):
        shapes.setdefault((kind, kv_heads, head_dim, window), []).append(layer)
    return tuple(LayerGroup(kind, tuple(layers), query_heads, kv, head_dim, window)
                 for (kind, kv, head_dim, window), layers in shapes.items())


def probe_without_weights(config, dtype: str = "float32") -> Probe:
    """``probe_attention`` on the model built on the meta device (shapes, no weights, no memory), in
    ``dtype`` as ``load_model`` would build it (some kernels accept only some dtypes)."""
    import torch
    from transformers import AutoModelForCausalLM

    from evolalloc.runtime.attention import use_evolalloc_attention

    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[dtype])
    except (ValueError, KeyError, ImportError) as err:  # no causal-LM class, or one that needs a missing package
        return Probe(True, f"transformers cannot build it as a causal LM ({_first_line(err)})")
    try:
        use_evolalloc_attention(model)
    except ValueError as err:  # transformers: this model's attention cannot be swapped
        return Probe(True, f"its attention does not go through transformers' attention interface ({_first_line(err)})")
    try:
        probe_attention(model.eval())
    except UnsupportedAttention as err:
        return Probe(True, str(err))
    except (RuntimeError, NotImplementedError) as err:  # an op the meta device cannot run (a MoE kernel...):
        # not a verdict on the attention; load_model still probes the real model before any use.
        return Probe(False, note=f"{type(err).__name__}: {_first_line(err)}")
    return Probe(True)


def _first_line(err: BaseException) -> str:
    return (str(err).splitlines() or [""])[0]


def model_card(spec: str, dtype: str = "float32") -> ModelCard:
    """Describe the model ``spec`` names (bundled, a HF folder or a GGUF file) from its config."""
    if dtype not in DTYPES:
        raise UserError(f"unsupported dtype {dtype!r}; choose one of {', '.join(DTYPES)}", field="--dtype")
    config, folder = config_of(spec)
    verdict = attention_support(config)
    probe = None
    if verdict.supported:  # the config's reason comes first; the probe only asks what the config cannot say
        probe = probe_without_weights(config, dtype)
        if probe.refusal:
            verdict = dataclasses.replace(verdict, supported=False, reason=probe.refusal)
    try:
        groups = layer_groups(config)
    except (AttributeError, TypeError, ValueError, ZeroDivisionError, IndexError):
        if verdict.supported:
            raise
        groups = ()  # an architecture the runtime refuses need not have these fields
    text = text_config(config)
    return ModelCard(spec=spec, model_type=str(getattr(config, "model_type", "?")),
                     text_type=str(getattr(text, "model_type", "?")),
                     classes=tuple(getattr(config, "architectures", None) or ()), support=verdict, dtype=dtype,
                     dtype_bytes=DTYPES[dtype].itemsize,
                     max_positions=int(getattr(text, "max_position_embeddings", 0) or 0),
                     geometry=geometry_of(config, DTYPES[dtype]) if verdict.supported else None,
                     groups=groups, probe=probe, chat_template=_has_chat_template(folder), terms=terms_of(spec))
