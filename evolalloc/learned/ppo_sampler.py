"""The ``ppo-policy`` scorer while it trains: its live network scores, the released tokens are drawn, and
every draw is recorded for the PPO update.

The runtime's decode-time eviction (``runtime/decode_eviction.py``) keeps, per (layer, KV head), the
top ``b`` of ``Scorer.rank_cached``: always-kept tokens first, then by score. Ranking by ``score - g``
with ``g`` Gumbel noise makes the last ``k`` of that ranking a draw of ``k`` tokens without replacement
from ``softmax(-score)`` over the candidates (Gumbel-top-k), so the runtime releases exactly the drawn
tokens and needs no change. The prompt's compression after the prefill is drawn the same way
(``draw_prompt_release``), from the features the prefill recorded (``score``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evolalloc.runtime.ppo_network import cached_features, prefill_features
from evolalloc.runtime.scorers.base import CachedStats, LayerStats
from evolalloc.runtime.scorers.ppo_policy import PPOPolicy

_FAR = float("inf")


def gumbel(shape, generator: torch.Generator | None) -> torch.Tensor:
    """Gumbel(0, 1) noise of ``shape``; zeros without a generator (the greedy policy)."""
    if generator is None:
        return torch.zeros(shape)
    uniform = torch.rand(shape, generator=generator).clamp(1e-20, 1.0 - 1e-7)
    return -torch.log(-torch.log(uniform))


@dataclass
class Release:
    """One (layer, round) of releases while decoding, for a batch of ``B`` rows.

    ``features`` ``[B, Hkv, S, F]``; ``order`` ``[B, Hkv, S]`` slots, the drawn releases first (the
    runtime releases the first ``counts - budget`` of them); ``candidates`` ``[B, Hkv, S]`` the slots that
    could be released; ``counts`` ``[B, Hkv]`` tokens cached before it; ``length``: the sequence length.
    """

    layer: int
    length: int
    features: torch.Tensor
    order: torch.Tensor
    candidates: torch.Tensor
    counts: torch.Tensor


class TrainingPolicy(PPOPolicy):
    """``ppo-policy`` scoring with a live network; ``generator`` set: releases are drawn and recorded."""

    def attach(self, network, generator: torch.Generator | None) -> "TrainingPolicy":
        self._network, self.generator = network, generator
        self.releases: list[Release] = []
        self.prompt_features: dict[int, torch.Tensor] = {}  # layer -> [Hkv, L, F], from the last prefill
        return self

    def network(self):
        return self._network

    def score(self, stats: LayerStats) -> torch.Tensor:
        features = prefill_features(stats, self._network.config.num_layers)
        self.prompt_features[stats.layer_idx] = features
        with torch.no_grad():
            return self._network(features, self._network.layer_heads(stats.layer_idx))

    def score_cached(self, stats: CachedStats) -> torch.Tensor:
        features = cached_features(stats, self._network.config.num_layers)
        with torch.no_grad():
            scores = self._network(features, self._network.layer_heads(stats.layer_idx))
        if self.generator is None:
            return scores
        lengths = stats.length.unique()
        if lengths.numel() != 1:
            raise ValueError("ppo training feeds every row alike: rows of different lengths cannot be recorded")
        forced = (stats.positions < self.sinks) | (stats.positions >= stats.length[:, None, None] - self.window)
        candidates = stats.valid & ~forced
        if stats.reachable is not None:
            candidates = candidates & stats.reachable
        drawn = scores - gumbel(scores.shape, self.generator).to(scores.device)
        order = drawn.masked_fill(~candidates, _FAR).argsort(dim=-1, stable=True)  # released first
        self.releases.append(Release(stats.layer_idx, int(lengths), features, order, candidates,
                                     stats.valid.sum(dim=-1)))
        return drawn


def draw_prompt_release(network, features: torch.Tensor, budget: int, sinks: int, window: int,
                        generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Draw which prompt tokens each head releases when a prompt of ``L`` tokens is compressed to ``budget``.

    ``features`` ``[H, L, F]`` (every (layer, KV head) of the model, in ``layer_heads`` order). Returns
    ``(ranking [H, L], order [H, L], candidates [H, L], k)``: the ranking the record keeps the top
    ``budget`` of (always-kept tokens first, then by drawn score), the release order (released first),
    the tokens that could be released, and how many are (``k = L - budget``, at least 0).
    """
    heads, length, _ = features.shape
    with torch.no_grad():
        scores = network(features, slice(None))
    positions = torch.arange(length)
    candidates = ((positions >= sinks) & (positions < length - window)).expand(heads, length)
    drawn = scores - gumbel(scores.shape, generator)
    order = drawn.masked_fill(~candidates, _FAR).argsort(dim=-1, stable=True)
    ranking = drawn.masked_fill(~candidates, _FAR).argsort(dim=-1, descending=True, stable=True)
    k = max(0, min(length - budget, int(candidates[0].sum())))
    return ranking, order, candidates, k
