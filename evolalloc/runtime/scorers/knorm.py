"""Key norm (Devoto et al., 2024, arXiv:2406.11430): low-norm keys draw high attention, keep them.

Query-free: a token scores the negative L2 norm of its key, which a generated token has as soon as
it is cached: it ranks generated tokens the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import CachedStats, LayerStats, Scorer


@register_scorer("knorm")
@dataclass
class KNorm(Scorer):
    ranks_generated = True

    def score(self, stats: LayerStats) -> torch.Tensor:
        return -stats.keys.float().norm(dim=-1)  # [Hkv, L]

    def score_cached(self, stats: CachedStats) -> torch.Tensor:
        return -stats.keys.float().norm(dim=-1)  # [B, Hkv, S]
