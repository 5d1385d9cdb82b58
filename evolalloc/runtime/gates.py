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

from dataclasses import dataclass

import torch
from torch import nn

from evolalloc.runtime.per_head import HeadGeometry, NetworkFile, PerHeadNetwork


@dataclass(frozen=True)
class GatesConfig(HeadGeometry):
    hidden: int = 32
    horizon: int = 32


class RetentionGates(PerHeadNetwork):
    """``heads`` gates ``features -> hidden`` (batched) and one shared ``hidden -> 1`` readout.

    Head ``g`` is (layer ``g // num_kv_heads``, KV head ``g % num_kv_heads``).
    """

    def __init__(self, config: GatesConfig, initial_retention: float = 0.995):
        if config.hidden < 1 or config.horizon < 1:
            raise ValueError(f"gates hidden and horizon must be >= 1, got {config.hidden}, {config.horizon}")
        super().__init__(config)
        bound = config.features**-0.5
        self.weight = nn.Parameter(torch.empty(config.heads, config.features, config.hidden).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(config.heads, 1, config.hidden))
        self.shared = nn.Linear(config.hidden, 1)  # THE shared final projection: one parameter set
        with torch.no_grad():
            self.shared.weight.mul_(0.1)
            # Start near "keep everything": long-range tokens are not evicted before learning says so.
            self.shared.bias.fill_(float(torch.logit(torch.tensor(initial_retention))))

    @staticmethod
    def features(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """keys, values ``[h, m, D]`` -> ``[h, m, 2D]`` float32."""
        return torch.cat([keys.float(), values.float()], dim=-1)

    def log_retention(self, features: torch.Tensor, heads: slice | torch.Tensor | None = None) -> torch.Tensor:
        """features ``[h, m, F]`` of the selected heads -> ``log beta`` ``[h, m]`` (< 0)."""
        select = slice(None) if heads is None else heads
        x = self.standardised(features, select)
        hidden = torch.nn.functional.gelu(torch.baddbmm(self.bias[select], x, self.weight[select]))
        return torch.nn.functional.logsigmoid(self.shared(hidden)[..., 0])


def horizon_score(log_beta: torch.Tensor, age: torch.Tensor, horizon: int) -> torch.Tensor:
    """``log sum_{k=1..W} beta ** (age + k)`` = ``age log beta + log sum_k beta ** k``, computed stably.

    log_beta ``[..., m]`` (< 0), age ``[m]`` (``n - i``, >= 1) -> ``[..., m]``.
    """
    lb = log_beta.clamp(max=-1e-7)
    geometric = lb + torch.log(-torch.expm1(horizon * lb)) - torch.log(-torch.expm1(lb))
    return age.to(lb.dtype) * lb + geometric


GATES_FILE = NetworkFile(what="gates", fmt="evolalloc-gates", version=1, train_hint="evolalloc gates train",
                         settings=("hidden", "horizon"), config_class=GatesConfig, network_class=RetentionGates)
save_gates, load_gates = GATES_FILE.save, GATES_FILE.load
