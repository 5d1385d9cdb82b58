"""StreamingLLM (Xiao et al., 2024, arXiv:2309.17453): attention sinks plus the most recent tokens.

At budget ``b`` the first ``sinks`` tokens and the last ``b - sinks`` are kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import LayerStats, Scorer


@register_scorer("streaming")
@dataclass
class Streaming(Scorer):
    sinks: int = 4

    def score(self, stats: LayerStats) -> torch.Tensor:
        heads = stats.keys.shape[0]
        recency = torch.arange(stats.length, device=stats.keys.device, dtype=torch.float32)
        return recency.expand(heads, -1)  # later is better
