"""Loading models: a bundled one (``runtime/bundled.py``), a local HF folder, or a local GGUF file.

``load_model(spec)`` returns a ``LoadedModel`` (model in eval mode, tokenizer, geometry). The
model's attention implementation is switched to evolalloc's (see ``attention.py``); that one is a
superset of plain causal attention, so the model still behaves normally outside our runtime.

A GGUF file is dequantized once into the cache (``runtime/model_files.py``), and every read of a
config or a GGUF file goes through there, so a file that cannot be read is one line naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from evolalloc import DEFAULT_MODEL
from evolalloc.core.errors import UserError
from evolalloc.core.geometry import ModelGeometry
from evolalloc.core.paths import cache_dir  # noqa: F401 - re-exported: the one definition is in core
from evolalloc.runtime.bundled import BUNDLED, BUNDLED_PREFIX, bundled_model, bundled_name
from evolalloc.runtime.model_files import dequantize_to_cache, is_gguf, read_config, read_tokenizer
from evolalloc.runtime.support import (
    UnsupportedAttention,
    attention_support,
    probe_attention,
    sliding_windows,
    text_config,
)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class LoadedModel:
    """A model ready for the eviction runtime."""

    spec: str
    model: torch.nn.Module
    tokenizer: object
    geometry: ModelGeometry

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device


def geometry_of(config, dtype: torch.dtype = torch.float32) -> ModelGeometry:
    """The KV-cache geometry of a HF config (a multimodal wrapper's text model), sliding windows included."""
    config = text_config(config)
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return ModelGeometry(
        num_layers=config.num_hidden_layers,
        num_query_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        max_positions=getattr(config, "max_position_embeddings", 0) or 0,
        dtype_bytes=torch.empty((), dtype=dtype).element_size(),
        windows=tuple(sliding_windows(config)),
    )


def check_supported(config, folder) -> None:
    """``UserError`` (one line, naming what is missing) unless the runtime implements the model's attention."""
    verdict = attention_support(config)
    if not verdict.supported:
        raise UserError(f"unsupported model {verdict.model_type!r} in {folder}: {verdict.reason}", field="model")


def prepare_model(model, where="the model") -> None:
    """Switch ``model`` to evolalloc's attention and probe it (``runtime/support.py``): a layer that
    does not call the attention interface, or passes what the runtime does not implement, refuses
    the model here, in one line, instead of running it wrong."""
    from evolalloc.runtime.attention import use_evolalloc_attention

    check_supported(model.config, where)
    try:
        use_evolalloc_attention(model)
    except ValueError as err:  # transformers: this model's attention cannot be swapped
        raise UserError(f"unsupported model in {where}: its attention does not go through transformers' "
                        f"attention interface ({err})", field="model") from None
    try:
        probe_attention(model)
    except UnsupportedAttention as err:
        raise UserError(f"unsupported model in {where}: {err}", field="model") from None


def resolve_model_folder(spec: str) -> Path:
    """A local folder with config.json for any accepted spec (converting GGUF when needed)."""
    name = bundled_name(spec)
    if name is not None:
        return bundled_model(name).folder()
    path = Path(spec).expanduser()
    if not path.exists():
        raise UserError(
            f"no such model path {str(path)!r}; give a local HF model folder, a .gguf file, "
            f"or one of: {', '.join(BUNDLED_PREFIX + n for n in BUNDLED)}",
            field="model",
        )
    if path.is_file():
        if not is_gguf(path):
            raise UserError(f"{path} is a file but not a .gguf file", field="model")
        return dequantize_to_cache(path)
    if not (path / "config.json").is_file():
        raise UserError(f"{path} has no config.json: not a HF model folder", field="model")
    return path


def load_tokenizer(spec: str = DEFAULT_MODEL):
    """The tokenizer of a model spec (cheap: no weights are loaded once the cache exists)."""
    return read_tokenizer(resolve_model_folder(spec))


def model_geometry(spec: str = DEFAULT_MODEL, dtype: str = "float32") -> ModelGeometry:
    """The geometry of a model spec from its config alone (no weights loaded)."""
    if dtype not in DTYPES:
        raise UserError(f"unsupported dtype {dtype!r}; choose one of {', '.join(DTYPES)}", field="dtype")
    return geometry_of(read_config(resolve_model_folder(spec)), DTYPES[dtype])


def load_model(spec: str = DEFAULT_MODEL, dtype: str = "float32", device: str | None = None) -> LoadedModel:
    """Load a causal LM for the eviction runtime.

    ``spec``: ``bundled:<name>`` (``runtime/bundled.py``), a local HF model folder, or a local ``.gguf`` file.
    ``dtype``: ``float32`` or ``bfloat16`` (``float16`` on GPU). ``device``: default ``cuda`` when
    available, else ``cpu``.
    """
    from transformers import AutoModelForCausalLM

    if dtype not in DTYPES:
        raise UserError(f"unsupported dtype {dtype!r}; choose one of {', '.join(DTYPES)}", field="dtype")
    folder = resolve_model_folder(spec)
    config = read_config(folder)
    check_supported(config, folder)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=DTYPES[dtype]).to(device).eval()
    prepare_model(model, folder)
    tokenizer = read_tokenizer(folder, config)
    return LoadedModel(spec=spec, model=model, tokenizer=tokenizer, geometry=geometry_of(config, DTYPES[dtype]))
