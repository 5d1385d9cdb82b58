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

from evolalloc.core.paths import resolve_checkpoint
from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import LayerStats, Scorer

_CACHE: dict[tuple[str, float], object] = {}


def _load(path: str):
    from evolalloc.runtime.policy import load_policy  # deferred: importing the registry stays cheap

    resolved = resolve_checkpoint("learned", path)
    mtime = resolved.stat().st_mtime if resolved.is_file() else -1.0
    key = (str(resolved.resolve()), mtime)
    if key not in _CACHE:
        _CACHE[key] = load_policy(resolved)
    return _CACHE[key]


@register_scorer("learned")
@dataclass
class Learned(Scorer):
    checkpoint: str = ""  # "": the default checkpoint under the cache directory (core.paths)
    sinks: int = 4
    window: int = 16

    def __post_init__(self):
        # Resolved now, so provenance and ``key`` name the file really read, wherever EVOLALLOC_CACHE points.
        self.checkpoint = str(resolve_checkpoint("learned", self.checkpoint))

    def check_checkpoint(self, geometry: dict, model: dict | None = None) -> None:
        from evolalloc.runtime.policy import load_policy

        load_policy(self.checkpoint, geometry=geometry, model=model)

    def checkpoint_provenance(self) -> dict:
        from evolalloc.runtime.checkpoint_file import checkpoint_provenance

        return checkpoint_provenance(self.checkpoint)

    def score(self, stats: LayerStats) -> torch.Tensor:
        loaded = _load(self.checkpoint)
        policy = loaded.policy
        heads, _, dim = stats.keys.shape
        config = policy.config
        if heads != config.num_kv_heads or dim != config.head_dim or stats.layer_idx >= config.num_layers:
            raise ValueError(
                f"policy {self.checkpoint!r} was trained for {config.num_layers} layers x {config.num_kv_heads} KV heads "
                f"x head_dim {config.head_dim}; got layer {stats.layer_idx} with {heads} KV heads x head_dim {dim}"
            )
        features = policy.features(stats.keys, stats.values)  # [Hkv, L, 2D + 1]
        with torch.no_grad():
            policy.to(stats.keys.device)
            return policy(features, policy.layer_heads(stats.layer_idx))  # [Hkv, L]
