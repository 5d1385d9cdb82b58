"""SnapKV (Li et al., 2024, arXiv:2404.14469): keep what the last queries attend to.

The attention of the last ``window`` prompt queries to every earlier key is summed over those
queries, smoothed with a 1-D pool of ``kernel`` (so a kept token brings its neighbours), and
averaged over the query heads of each KV group. The window itself is always kept.

``pool_window=False`` pools only the votes of the tokens before the window (the window's own
votes never smooth into its neighbours), as kvpress's ``SnapKVPress`` does; with
``pooling="avg"`` that is kvpress's scoring exactly (see ``benchmarks/kvpress_agreement.sh``).

While decoding (decode-time eviction) the observation window is the last ``window`` *fed* queries (the
generated tokens'; fewer before that many are fed), their attention over the tokens now cached, pooled
over cached neighbours in position order; the last ``window`` tokens of the sequence are kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from evolalloc.runtime.capture import CaptureSpec
from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import CachedStats, LayerStats, Scorer


@register_scorer("snapkv")
@dataclass
class SnapKV(Scorer):
    query_free = False
    ranks_generated = True
    window: int = 32
    kernel: int = 7
    pooling: str = "max"  # "max" or "avg"
    pool_window: bool = True  # False: pool the prefix only (kvpress's SnapKVPress)

    def __post_init__(self):
        if self.pooling not in ("max", "avg"):
            raise ValueError(f"snapkv pooling must be 'max' or 'avg', got {self.pooling!r}")
        if self.kernel < 1 or self.kernel % 2 == 0:
            raise ValueError(f"snapkv kernel must be an odd positive integer, got {self.kernel}")

    @property
    def capture(self) -> CaptureSpec:
        return CaptureSpec(window_queries=self.window)

    def score(self, stats: LayerStats) -> torch.Tensor:
        attention = stats.window_attention[:, -self.window :, :]  # [Hq, w, L]
        votes = attention.sum(dim=1)  # [Hq, L]
        prefix = votes.shape[-1] if self.pool_window else max(votes.shape[-1] - self.window, 0)
        return stats.per_kv_head(smooth_votes(votes, self.kernel, self.pooling, prefix))

    def score_cached(self, stats: CachedStats) -> torch.Tensor:
        votes = stats.recent_attention[:, :, -self.window :, :].sum(dim=2)  # [B, Hq, S]
        pooled = stats.valid
        if not self.pool_window:  # only the tokens before the sequence's last `window` are smoothed
            pooled = pooled & (stats.positions < stats.length[:, None, None] - self.window)
        pooled = pooled.repeat_interleave(votes.shape[1] // pooled.shape[1], dim=1)  # per query head
        pool = F.max_pool1d if self.pooling == "max" else F.avg_pool1d
        batch, heads, slots = votes.shape
        # Cached neighbours in position order (valid slots come first, in order); outside the pooled
        # slots a vote is neither smoothed nor smoothed into another, as the prefill's prefix rule.
        smoothed = pool((votes * pooled).reshape(batch * heads, 1, slots), kernel_size=self.kernel, stride=1,
                        padding=self.kernel // 2).reshape(batch, heads, slots)
        return stats.per_kv_head(torch.where(pooled, smoothed, votes))


def smooth_votes(votes: torch.Tensor, kernel: int, pooling: str = "max", prefix: int | None = None) -> torch.Tensor:
    """SnapKV's smoothing: votes ``[Hq, L]`` pooled per query head over ``kernel`` tokens (the
    first ``prefix`` of them; all by default) -> ``[Hq, L]``. The anchored gates
    (``runtime.gates.snap_votes``) read exactly this."""
    prefix = votes.shape[-1] if prefix is None else prefix
    pool = F.max_pool1d if pooling == "max" else F.avg_pool1d
    smoothed = votes.clone()
    if prefix:
        smoothed[:, :prefix] = pool(votes[:, None, :prefix], kernel_size=kernel, stride=1, padding=kernel // 2)[:, 0, :]
    return smoothed
