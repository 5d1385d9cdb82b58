"""H2O (Zhang et al., 2023, arXiv:2306.14048): heavy hitters plus a recent window.

A token's score is the attention it received from every prefill query, summed (the accumulated
attention of H2O's prefill), averaged over each KV group's query heads. The most recent
``window`` tokens are always kept, standing in for H2O's recent-token half of the budget.
Needs the prefill to accumulate full attention: about one extra attention pass per layer.

While decoding (decode-time eviction) the sum goes on: every fed query's attention is added to the
prefill's (``runtime/online_capture.py``), and the most recent ``window`` tokens of the sequence are kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evolalloc.runtime.capture import CaptureSpec
from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import CachedStats, LayerStats, Scorer


@register_scorer("h2o")
@dataclass
class H2O(Scorer):
    query_free = False
    ranks_generated = True
    window: int = 32

    @property
    def capture(self) -> CaptureSpec:
        return CaptureSpec(attention_sum=True)

    def score(self, stats: LayerStats) -> torch.Tensor:
        return stats.per_kv_head(stats.attention_sum)

    def score_cached(self, stats: CachedStats) -> torch.Tensor:
        return stats.attention_sum  # [B, Hkv, S], already per KV head
