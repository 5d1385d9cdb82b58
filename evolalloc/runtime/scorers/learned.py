"""Learned (KV Policy, "Learning to evict from key-value cache", §3): a per-KV-head MLP ranks tokens.

Query-free: a token's score is ``MLP_(layer, head)(key, value, i / n)``; no attention, no query.
The ranking is therefore computed once at prefill, like every other scorer, and the kept set at
budget ``b`` is its top-``b`` prefix. The first ``sinks`` and last ``window`` tokens are always
kept and were excluded from ranking in training (paper, App. A.2: first 4 and last 16).

The checkpoint is loaded on first use (not at import) and cached per path and modification time.
Train one with ``evolalloc scorer train``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import LayerStats
from evolalloc.runtime.scorers.checkpointed import CheckpointScorer


@register_scorer("learned")
@dataclass
class Learned(CheckpointScorer):
    checkpoint_kind = "learned"

    @staticmethod
    def _read(path, geometry=None, model=None):
        from evolalloc.runtime.policy import load_policy  # deferred: importing the registry stays cheap

        return load_policy(path, geometry=geometry, model=model)

    def score(self, stats: LayerStats) -> torch.Tensor:
        loaded = self.loaded()
        policy = loaded.network
        heads, _, dim = stats.keys.shape
        config = policy.config
        if heads != config.num_kv_heads or dim != config.head_dim or stats.layer_idx >= config.num_layers:
            raise ValueError(
                f"policy {self.checkpoint!r} was trained for "
                f"{config.num_layers} layers x {config.num_kv_heads} KV heads "
                f"x head_dim {config.head_dim}; got layer {stats.layer_idx} with {heads} KV heads x head_dim {dim}"
            )
        features = policy.features(stats.keys, stats.values)  # [Hkv, L, 2D + 1]
        with torch.no_grad():
            policy.to(stats.keys.device)
            return policy(features, policy.layer_heads(stats.layer_idx))  # [Hkv, L]
