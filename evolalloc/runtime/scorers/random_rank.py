"""Random: a seeded random ranking per (layer, KV head) — the floor every scorer must beat."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import LayerStats, Scorer


@register_scorer("random")
@dataclass
class RandomScorer(Scorer):
    why_not_generated = "its draws are seeded per prompt; no batch-independent draw per eviction is implemented"
    seed: int = 0

    def score(self, stats: LayerStats) -> torch.Tensor:
        # Seeded per layer and length so rankings are reproducible and differ across layers.
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + stats.layer_idx * 10_007 + stats.length)
        heads = stats.keys.shape[0]
        return torch.rand(heads, stats.length, generator=generator).to(stats.keys.device)
