"""What the two per-(layer, KV head) networks (the learned policy, the retention gates) share:
the geometry they are built for, the head numbering, the feature standardisation, and the
checkpoint round trip. Each network keeps its own architecture and features."""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

import torch
from torch import nn

from evolalloc.core.fileio import write_atomic
from evolalloc.runtime.checkpoint_file import read_checkpoint


@dataclass(frozen=True)
class HeadGeometry:
    """The model shape a per-head network is sized for; subclasses add the network's settings."""

    num_layers: int
    num_kv_heads: int
    head_dim: int

    #: inputs per token beyond its key and value (the policy's position: 1)
    extra_features: ClassVar[int] = 0

    @property
    def heads(self) -> int:
        return self.num_layers * self.num_kv_heads

    @property
    def features(self) -> int:
        """Input features per token: key and value, then the extra ones."""
        return 2 * self.head_dim + self.extra_features


class PerHeadNetwork(nn.Module):
    """Base of a module holding one network per head ``g`` = (layer ``g // num_kv_heads``, KV head
    ``g % num_kv_heads``), with standardised input features ``[heads, 1, features]``."""

    def __init__(self, config: HeadGeometry):
        super().__init__()
        self.config = config
        # Identity until fitted on traces.
        self.register_buffer("feature_mean", torch.zeros(config.heads, 1, config.features))
        self.register_buffer("feature_std", torch.ones(config.heads, 1, config.features))

    def standardised(self, features: torch.Tensor, select) -> torch.Tensor:
        """features ``[h, m, F]`` of the heads ``select`` picks -> the same, standardised."""
        return (features - self.feature_mean[select]) / self.feature_std[select]

    def layer_heads(self, layer: int) -> slice:
        """The head slice of one model layer."""
        k = self.config.num_kv_heads
        return slice(layer * k, (layer + 1) * k)

    @torch.no_grad()
    def fit_standardisation(self, features: torch.Tensor) -> None:
        """Set the feature mean/std from a sample ``[heads, n, F]`` (n tokens per head)."""
        self.feature_mean.copy_(features.mean(dim=1, keepdim=True))
        self.feature_std.copy_(features.std(dim=1, keepdim=True).clamp_min(1e-4))


def save_network(path: str | Path, network: PerHeadNetwork, *, fmt: str, version: int, settings: tuple[str, ...],
                 model: dict, geometry: dict, training: dict) -> Path:
    """Write a versioned checkpoint atomically; ``settings`` are the config fields beyond the geometry."""
    config = asdict(network.config)
    payload = {
        "format": fmt, "version": version, "model": dict(model), "geometry": dict(geometry),
        "config": {k: config[k] for k in settings}, "training": dict(training),
        "state_dict": {k: v.detach().cpu() for k, v in network.state_dict().items()},
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return write_atomic(path, buffer.getvalue())


@dataclass
class LoadedNetwork:
    """A checkpoint read back: the network (eval mode) and what it was trained for and how."""

    network: PerHeadNetwork
    model: dict
    geometry: dict
    training: dict


def loaded_network(payload: dict, config_class: type[HeadGeometry],
                   network_class: type[PerHeadNetwork]) -> LoadedNetwork:
    """What a checked checkpoint payload (``checkpoint_file.read_checkpoint``) holds."""
    stored = payload["geometry"]
    config = config_class(num_layers=stored["num_layers"], num_kv_heads=stored["num_kv_heads"],
                          head_dim=stored["head_dim"], **payload["config"])
    network = network_class(config)
    network.load_state_dict(payload["state_dict"])
    network.eval()
    return LoadedNetwork(network, payload["model"], stored, payload.get("training", {}))


@dataclass(frozen=True)
class NetworkFile:
    """One kind of checkpoint file: how a network of ``network_class`` is written and read back.

    ``settings`` are the config fields stored beside the geometry; ``what`` and ``train_hint``
    word the errors (``checkpoint_file.read_checkpoint``)."""

    what: str
    fmt: str
    version: int
    train_hint: str
    settings: tuple[str, ...]
    config_class: type[HeadGeometry]
    network_class: type[PerHeadNetwork]

    def save(self, path: str | Path, network: PerHeadNetwork, *, model: dict, geometry: dict, training: dict) -> Path:
        """Write a versioned checkpoint atomically (``fileio.write_atomic``)."""
        return save_network(path, network, fmt=self.fmt, version=self.version, settings=self.settings,
                            model=model, geometry=geometry, training=training)

    def load(self, path: str | Path, *, geometry: dict | None = None, model: dict | None = None) -> LoadedNetwork:
        """Read a checkpoint; ``geometry`` / ``model`` (when given) must match what it was trained for.
        ``ValueError`` for a missing or foreign file, another version, or a mismatch."""
        payload = read_checkpoint(path, what=self.what, fmt=self.fmt, version=self.version, train_hint=self.train_hint,
                                  geometry=geometry, model=model)
        return loaded_network(payload, self.config_class, self.network_class)
