"""KeyDiff (Park et al., 2025, arXiv:2504.15364): keep the keys least like the average key.

Query-free: the anchor is the mean of the layer-head's normalised keys, and a token scores its
negative cosine similarity to it, so distinctive keys are kept. While decoding the anchor is the
mean over the keys now cached (KeyDiff's own setting: eviction under a fixed cache, block by block).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import CachedStats, LayerStats, Scorer


@register_scorer("keydiff")
@dataclass
class KeyDiff(Scorer):
    ranks_generated = True

    def score(self, stats: LayerStats) -> torch.Tensor:
        keys = F.normalize(stats.keys.float(), dim=-1)  # [Hkv, L, D]
        anchor = keys.mean(dim=1, keepdim=True)  # [Hkv, 1, D]
        return -F.cosine_similarity(keys, anchor, dim=-1)  # [Hkv, L]

    def score_cached(self, stats: CachedStats) -> torch.Tensor:
        keys = F.normalize(stats.keys.float(), dim=-1) * stats.valid[..., None]  # [B, Hkv, S, D], padding zeroed
        anchor = keys.sum(dim=2, keepdim=True) / stats.valid.sum(dim=-1).clamp_min(1)[..., None, None]
        return -F.cosine_similarity(keys, anchor, dim=-1)  # [B, Hkv, S]
