"""StreamingLLM (Xiao et al., 2024, arXiv:2309.17453): attention sinks plus the most recent tokens.

At budget ``b`` the first ``sinks`` tokens and the last ``b - sinks`` are kept; while decoding too
(the recent ones are then the last of the prompt and the generated tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import CachedStats, LayerStats, Scorer


@register_scorer("streaming")
@dataclass
class Streaming(Scorer):
    ranks_generated = True
    sinks: int = 4

    def score(self, stats: LayerStats) -> torch.Tensor:
        heads = stats.keys.shape[0]
        recency = torch.arange(stats.length, device=stats.keys.device, dtype=torch.float32)
        return recency.expand(heads, -1)  # later is better

    def score_cached(self, stats: CachedStats) -> torch.Tensor:
        return stats.positions.to(torch.float32)
