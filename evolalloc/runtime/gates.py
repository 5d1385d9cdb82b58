"""Retention gates with a shared final projection (paper 001, "Make Each Token Count", §4), and their checkpoint.

Every (layer, KV head) has a small gate ``phi_(l,h)``: features -> ``hidden`` (GELU). One
final projection ``w, b``, *shared by all layers and heads* (weight-tied), reads every gate out:

    logit_(l,h)(x) = w . phi_(l,h)(x) + b,        beta = sigmoid(logit)  in (0, 1)

so a retention ``beta`` means the same in every head, and tokens of different layers and heads
can be ranked against each other (one global top-k, ``runtime.adaptive.global_topk``).

Input features: the token's cached key and value ``[key (D), value (D)]`` (what the runtime and
the traces hold), standardised per head with statistics fitted on the training traces. The
paper feeds the token's hidden state instead; a key/value gate needs no change to the model's
forward and runs on any prefill record.

Score at compression (paper §4, "horizon weights" all 1): a token at position ``i`` of an
``n``-token prompt, with retention ``beta``, scores its predicted utility over the next ``W``
steps, ``sum_{k=1..W} beta ** (n - i + k)``; we rank by its logarithm,
``(n - i) log beta + log sum_{k=1..W} beta ** k`` (``W = 1`` is the myopic score of TrimKV).

Checkpoint (``torch.save`` of a plain dict, loaded with ``weights_only=True``)::

    format: "evolalloc-gates", version: 1
    model: {"spec", "model_type", "fingerprint"}     # runtime.policy.model_identity
    geometry: ModelGeometry.to_dict()                # checked on load
    config: {"hidden", "horizon"}
    training: free-form provenance
    state_dict: the module's tensors
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from evolalloc.core.fileio import write_atomic
from evolalloc.runtime.checkpoint_file import read_checkpoint

FORMAT = "evolalloc-gates"
VERSION = 1


@dataclass(frozen=True)
class GatesConfig:
    num_layers: int
    num_kv_heads: int
    head_dim: int
    hidden: int = 32
    horizon: int = 32

    @property
    def heads(self) -> int:
        return self.num_layers * self.num_kv_heads

    @property
    def features(self) -> int:
        return 2 * self.head_dim


class RetentionGates(nn.Module):
    """``heads`` gates ``features -> hidden`` (batched) and one shared ``hidden -> 1`` readout.

    Head ``g`` is (layer ``g // num_kv_heads``, KV head ``g % num_kv_heads``).
    """

    def __init__(self, config: GatesConfig, initial_retention: float = 0.995):
        super().__init__()
        if config.hidden < 1 or config.horizon < 1:
            raise ValueError(f"gates hidden and horizon must be >= 1, got {config.hidden}, {config.horizon}")
        self.config = config
        bound = config.features**-0.5
        self.weight = nn.Parameter(torch.empty(config.heads, config.features, config.hidden).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(config.heads, 1, config.hidden))
        self.shared = nn.Linear(config.hidden, 1)  # THE shared final projection: one parameter set
        with torch.no_grad():
            self.shared.weight.mul_(0.1)
            # Start near "keep everything": long-range tokens are not evicted before learning says so.
            self.shared.bias.fill_(float(torch.logit(torch.tensor(initial_retention))))
        self.register_buffer("feature_mean", torch.zeros(config.heads, 1, config.features))
        self.register_buffer("feature_std", torch.ones(config.heads, 1, config.features))

    @staticmethod
    def features(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """keys, values ``[h, m, D]`` -> ``[h, m, 2D]`` float32."""
        return torch.cat([keys.float(), values.float()], dim=-1)

    def log_retention(self, features: torch.Tensor, heads: slice | torch.Tensor | None = None) -> torch.Tensor:
        """features ``[h, m, F]`` of the selected heads -> ``log beta`` ``[h, m]`` (< 0)."""
        select = slice(None) if heads is None else heads
        x = (features - self.feature_mean[select]) / self.feature_std[select]
        hidden = torch.nn.functional.gelu(torch.baddbmm(self.bias[select], x, self.weight[select]))
        return torch.nn.functional.logsigmoid(self.shared(hidden)[..., 0])

    def layer_heads(self, layer: int) -> slice:
        k = self.config.num_kv_heads
        return slice(layer * k, (layer + 1) * k)

    @torch.no_grad()
    def fit_standardisation(self, features: torch.Tensor) -> None:
        """Feature mean/std from a sample ``[heads, n, F]``."""
        self.feature_mean.copy_(features.mean(dim=1, keepdim=True))
        self.feature_std.copy_(features.std(dim=1, keepdim=True).clamp_min(1e-4))


def horizon_score(log_beta: torch.Tensor, age: torch.Tensor, horizon: int) -> torch.Tensor:
    """``log sum_{k=1..W} beta ** (age + k)`` = ``age log beta + log sum_k beta ** k``, computed stably.

    log_beta ``[..., m]`` (< 0), age ``[m]`` (``n - i``, >= 1) -> ``[..., m]``.
    """
    lb = log_beta.clamp(max=-1e-7)
    geometric = lb + torch.log(-torch.expm1(horizon * lb)) - torch.log(-torch.expm1(lb))
    return age.to(lb.dtype) * lb + geometric


def save_gates(path: str | Path, gates: RetentionGates, *, model: dict, geometry: dict, training: dict) -> Path:
    config = asdict(gates.config)
    payload = {
        "format": FORMAT, "version": VERSION, "model": dict(model), "geometry": dict(geometry),
        "config": {"hidden": config["hidden"], "horizon": config["horizon"]}, "training": dict(training),
        "state_dict": {k: v.detach().cpu() for k, v in gates.state_dict().items()},
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return write_atomic(path, buffer.getvalue())


@dataclass
class LoadedGates:
    gates: RetentionGates
    model: dict
    geometry: dict
    training: dict


def load_gates(path: str | Path, *, geometry: dict | None = None, model: dict | None = None) -> LoadedGates:
    """Load a gates checkpoint; ``ValueError`` for a missing/foreign file, another version, or a mismatch."""
    payload = read_checkpoint(path, what="gates", fmt=FORMAT, version=VERSION, train_hint="evolalloc gates train",
                              geometry=geometry, model=model)
    stored = payload["geometry"]
    config = GatesConfig(num_layers=stored["num_layers"], num_kv_heads=stored["num_kv_heads"], head_dim=stored["head_dim"], **payload["config"])
    gates = RetentionGates(config)
    gates.load_state_dict(payload["state_dict"])
    gates.eval()
    return LoadedGates(gates=gates, model=payload["model"], geometry=stored, training=payload.get("training", {}))
