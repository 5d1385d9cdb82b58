"""A model of a real shape with random weights: what ``bench gpu`` and ``search --plan`` measure on.

Speed and memory do not depend on the weights, so a config is enough: ``--shape llama-3.1-8b``
(a file in ``bench/shapes/``) or a path to any HF ``config.json``. The weights are allocated on
the target device directly (an 8B model in float32 is 32 GB: it must never pass through host
memory on its way to a GPU), drawn with a fixed seed.

``layers`` keeps only the first ``K`` layers of the shape (a CPU estimate of an 8B shape); every
figure measured on such a model is for ``K`` layers, and ``ModelShape.truncated`` says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from evolalloc.core.errors import UserError

SHAPES_DIR = Path(__file__).parent / "shapes"


def shape_names() -> list[str]:
    """The shapes shipped in ``bench/shapes/`` (file stems)."""
    return sorted(path.stem for path in SHAPES_DIR.glob("*.json"))


@dataclass(frozen=True)
class ModelShape:
    """A config to build (``config``: the HF config dict) and where it came from."""

    name: str
    config: dict
    full_layers: int  # the shape's own layer count (before ``layers`` truncated it)

    @property
    def layers(self) -> int:
        return int(self.config["num_hidden_layers"])

    @property
    def truncated(self) -> bool:
        return self.layers < self.full_layers

    def banner(self) -> str | None:
        """The loud line a truncated shape's output carries, or ``None``."""
        if not self.truncated:
            return None
        return (f"!! TRUNCATED: only the first {self.layers} of "
                f"{self.name}'s {self.full_layers} layers are built; every "
                f"time and memory figure below is for {self.layers} layers, NOT for the whole model !!")


def load_shape(shape: str, layers: int | None = None) -> ModelShape:
    """``shape``: a name from ``shape_names()`` or a path to a config JSON. ``layers``: keep the first ``K``."""
    path = SHAPES_DIR / f"{shape}.json"
    if not path.is_file():
        path = Path(shape).expanduser()
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            raise UserError(f"unknown shape {shape!r}: give one of {', '.join(shape_names())} or a config.json path",
                            field="--shape")
    try:
        config = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise UserError(f"cannot read the config: {err}", source=str(path)) from None
    missing = [key for key in ("model_type", "num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
               if key not in config]
    if missing:
        raise UserError(f"the config lacks {', '.join(missing)}", source=str(path))
    full = int(config["num_hidden_layers"])
    if layers is not None:
        if not 1 <= layers <= full:
            raise UserError(f"--layers must be between 1 and the shape's {full} layers, got {layers}", field="--layers")
        config = {**config, "num_hidden_layers": int(layers)}
    name = path.stem if path.parent == SHAPES_DIR else str(path)
    return ModelShape(name=name, config=config, full_layers=full)


def hf_config(shape: ModelShape):
    """The transformers config object of ``shape`` (its ``model_type`` picks the class)."""
    from transformers import AutoConfig

    settings = {k: v for k, v in shape.config.items()
                if k not in ("model_type", "architectures", "transformers_version")}
    try:
        return AutoConfig.for_model(shape.config["model_type"], **settings)
    except (ValueError, KeyError, TypeError) as err:
        raise UserError(f"transformers cannot build this config: {err}", source=shape.name) from None


def planned_weight_bytes(shape: ModelShape, dtype: str) -> int:
    """The weights' bytes of ``shape`` in ``dtype``, counted on the meta device (nothing allocated)."""
    from transformers import AutoModelForCausalLM

    from evolalloc.runtime.model import DTYPES

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config(shape), dtype=DTYPES[dtype])
    return weight_bytes(model)


def free_bytes(device: str) -> int | None:
    """Memory free on ``device`` now (CUDA: the driver's count; CPU: available pages), or ``None``."""
    if device.startswith("cuda"):
        return torch.cuda.mem_get_info(torch.device(device))[0]
    try:
        import os

        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_shape(shape: ModelShape, device: str, dtype: str) -> None:
    """Before any weight: the runtime implements the shape's attention (``runtime/support.py``), and
    its weights fit the device (``check_weights_fit``); else a ``UserError``."""
    from evolalloc.runtime.model import check_supported

    check_supported(hf_config(shape), shape.name)
    check_weights_fit(shape, device, dtype)


def check_weights_fit(shape: ModelShape, device: str, dtype: str) -> None:
    """Refuse (``UserError``) a shape whose weights alone would take over 90% of the device's free memory."""
    need, free = planned_weight_bytes(shape, dtype), free_bytes(device)
    if free is not None and need > 0.9 * free:
        raise UserError(f"{shape.name}'s {shape.layers} layers need "
                        f"{need / 2**30:.1f} GiB of weights in {dtype}; {device} has "
                        f"{free / 2**30:.1f} GiB free: build fewer layers "
                        "(--layers K) or use a device with more memory",
                        field="--shape")


def random_model(shape: ModelShape, *, device: str, dtype: str, seed: int = 0):
    """A ``LoadedModel`` of ``shape`` with random weights drawn with ``seed``, allocated on ``device``
    in ``dtype``, switched to evolalloc's attention. It has no tokenizer: prompts are token ids."""
    from transformers import AutoModelForCausalLM

    from evolalloc.runtime.model import DTYPES, LoadedModel, geometry_of, prepare_model

    if dtype not in DTYPES:
        raise UserError(f"unsupported dtype {dtype!r}; choose one of {', '.join(DTYPES)}", field="--dtype")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device {device!r} asked for, but torch sees no CUDA device", field="--device")
    config = hf_config(shape)
    torch.manual_seed(seed)
    # Allocated where it will run: the default device makes every parameter born there.
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[dtype]).eval()
    model.to(device)  # a no-op when every parameter was born there (buffers made on the host, if any, follow)
    prepare_model(model, shape.name)  # evolalloc's attention, probed as load_model probes a checkpoint
    return LoadedModel(spec=f"shape:{shape.name}", model=model, tokenizer=None,
                       geometry=geometry_of(config, DTYPES[dtype]))


def weight_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())
