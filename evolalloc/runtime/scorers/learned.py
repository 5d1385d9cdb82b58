"""Learned (KV Policy, "Learning to evict from key-value cache", §3): a per-KV-head MLP ranks tokens.

Query-free: a token's score is ``MLP_(layer, head)(key, value, i / n)``; no attention, no query.
The ranking is therefore computed once at prefill, like every other scorer, and the kept set at
budget ``b`` is its top-``b`` prefix. The first ``sinks`` and last ``window`` tokens are always
kept and were excluded from ranking in training (paper, App. A.2: first 4 and last 16).

The checkpoint is loaded on first use (not at import) and cached per path and modification time.
Train one with ``evolalloc scorer train``.

While decoding (decode-time eviction) the same network ranks the cache, generated tokens included:
a token's position feature is its original position over the sequence's length so far (the
prefill's ``i / L`` at the prompt's end).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import CachedStats, LayerStats
from evolalloc.runtime.scorers.checkpointed import CheckpointScorer


@register_scorer("learned")
@dataclass
class Learned(CheckpointScorer):
    checkpoint_kind = "learned"
    ranks_generated = True

    @staticmethod
    def _read(path, geometry=None, model=None):
        from evolalloc.runtime.policy import load_policy  # deferred: importing the registry stays cheap

        return load_policy(path, geometry=geometry, model=model)

    def score(self, stats: LayerStats) -> torch.Tensor:
        heads, _, dim = stats.keys.shape
        policy = self._policy(stats.layer_idx, heads, dim)
        features = policy.features(stats.keys, stats.values)  # [Hkv, L, 2D + 1]
        with torch.no_grad():
            policy.to(stats.keys.device)
            return policy(features, policy.layer_heads(stats.layer_idx))  # [Hkv, L]

    def score_cached(self, stats: CachedStats) -> torch.Tensor:
        batch, heads, slots, dim = stats.keys.shape
        policy = self._policy(stats.layer_idx, heads, dim)
        position = stats.positions.to(torch.float32) / stats.length.clamp_min(1)[:, None, None].to(torch.float32)
        features = torch.cat([stats.keys.float(), stats.values.float(), position[..., None]], dim=-1)
        features = features.transpose(0, 1).reshape(heads, batch * slots, -1)  # each head's rows side by side
        with torch.no_grad():
            policy.to(stats.keys.device)
            scores = policy(features, policy.layer_heads(stats.layer_idx))  # [Hkv, B * S]
        return scores.reshape(heads, batch, slots).transpose(0, 1)

    def _policy(self, layer: int, heads: int, dim: int):
        """The checkpoint's network, checked against one layer's shape."""
        policy = self.loaded().network
        config = policy.config
        if heads != config.num_kv_heads or dim != config.head_dim or layer >= config.num_layers:
            raise ValueError(
                f"policy {self.checkpoint!r} was trained for "
                f"{config.num_layers} layers x {config.num_kv_heads} KV heads "
                f"x head_dim {config.head_dim}; got layer {layer} with {heads} KV heads x head_dim {dim}"
            )
        return policy
