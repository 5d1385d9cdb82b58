"""TOVA (Oren et al., 2024, arXiv:2401.06104): keep what the last query attends to most.

Scores are the final prompt token's attention, averaged over each KV group's query heads. While
decoding, the last fed token's attention over the cache ranks it (TOVA's own, per-step rule).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evolalloc.runtime.capture import CaptureSpec
from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import CachedStats, LayerStats, Scorer


@register_scorer("tova")
@dataclass
class TOVA(Scorer):
    query_free = False
    ranks_generated = True

    @property
    def capture(self) -> CaptureSpec:
        return CaptureSpec(window_queries=1)

    def score(self, stats: LayerStats) -> torch.Tensor:
        return stats.per_kv_head(stats.window_attention[:, -1, :])  # [Hq, L] -> [Hkv, L]

    def score_cached(self, stats: CachedStats) -> torch.Tensor:
        return stats.per_kv_head(stats.recent_attention[:, :, -1, :])  # [B, Hq, S] -> [B, Hkv, S]
