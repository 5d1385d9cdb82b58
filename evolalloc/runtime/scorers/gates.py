"""Retention gates (paper 001): a token's score is its predicted utility over the next ``horizon``
steps from a per-head gate read out by one projection shared by all heads (``runtime.gates``).

Query-free, like ``learned``. The scores are on one scale across layers and heads, which is what
the ``gates`` method's global top-k (``runtime.adaptive.global_topk``) needs; with a per-head
budget this is an ordinary per-head ranking. Train a checkpoint with ``evolalloc gates train``.
"""

from __future__ import annotations

from dataclasses import dataclass
import torch

from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import LayerStats
from evolalloc.runtime.scorers.checkpointed import CheckpointScorer


@register_scorer("gates")
@dataclass
class Gates(CheckpointScorer):
    horizon: int = 0  # 0: the checkpoint's

    checkpoint_kind = "gates"

    @staticmethod
    def _read(path, geometry=None, model=None):
        from evolalloc.runtime.gates import load_gates

        return load_gates(path, geometry=geometry, model=model)

    def score(self, stats: LayerStats) -> torch.Tensor:
        gates = self.loaded().network
        config = gates.config
        heads, length, dim = stats.keys.shape
        if heads != config.num_kv_heads or dim != config.head_dim or stats.layer_idx >= config.num_layers:
            raise ValueError(f"gates {self.checkpoint!r} were trained for {config.num_layers} layers x {config.num_kv_heads} "
                             f"KV heads x head_dim {dim}; got layer {stats.layer_idx} with {heads} KV heads x head_dim {dim}")
        with torch.no_grad():
            gates.to(stats.keys.device)
            log_beta = gates.log_retention(gates.features(stats.keys, stats.values), gates.layer_heads(stats.layer_idx))
            from evolalloc.runtime.gates import horizon_score

            age = length - torch.arange(length, device=stats.keys.device)
            return horizon_score(log_beta, age, self.horizon or config.horizon)
