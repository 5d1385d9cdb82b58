"""The scorer base: a scorer turns one layer's prefill into a per-KV-head ranking of positions.

A scorer subclass implements ``score()`` only; the base turns scores into a ranking, puts the
always-kept tokens (attention sinks, the observation window) first, and breaks ties by recency.
Keeping the top-``b`` prefix of the ranking is then the scorer's choice at budget ``b``, and the
kept set at ``b`` is contained in the kept set at ``b + 1`` by construction.

Always-kept tokens count inside the budget, so a budget below ``always_kept`` is an error.

Decode-time eviction (``runtime/decode_eviction.py``) ranks a cache that holds generated tokens too:
a scorer that can says so (``ranks_generated``) and implements ``score_cached`` on ``CachedStats``
(what is known online: the cached keys/values and positions, the recent queries' attention, the
accumulated attention); ``rank_cached`` puts its always-kept tokens first, as ``rank_scored`` does.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import ClassVar

import torch

from evolalloc.runtime.capture import CaptureSpec


@dataclass
class LayerStats:
    """What the prefill capture measured for one layer (batch of one instance).

    ``keys``, ``values``: ``[Hkv, L, D]`` (keys after RoPE, as the cache holds them).
    ``window_attention``: ``[Hq, w, L]`` softmax of the last ``w`` queries, or ``None``.
    ``attention_sum``: ``[Hq, L]`` attention each key received, summed over all queries, or ``None``.
    """

    layer_idx: int
    keys: torch.Tensor
    values: torch.Tensor
    window_attention: torch.Tensor | None = None
    attention_sum: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return self.keys.shape[1]

    def per_kv_head(self, per_query_head: torch.Tensor) -> torch.Tensor:
        """Average ``[Hq, L]`` over each KV group's query heads -> ``[Hkv, L]`` (GQA)."""
        kv_heads = self.keys.shape[0]
        return per_query_head.view(kv_heads, -1, per_query_head.shape[-1]).mean(dim=1)


@dataclass
class CachedStats:
    """One layer of an evicted cache while decoding, for a batch of ``B`` rows (sequences).

    Slots are in position order per (row, KV head), the valid ones first (``S`` slots in all).
    ``keys``, ``values``: ``[B, Hkv, S, D]``; ``positions``: ``[B, Hkv, S]`` int64, original
    positions; ``valid``: ``[B, Hkv, S]`` bool; ``length``: ``[B]`` int64, each row's tokens so far
    (its next position). ``reachable``: ``[B, Hkv, S]`` bool, what a sliding-window layer can still
    attend to (``None``: everything). ``recent_attention``: ``[B, Hq, w, S]`` float32, the softmax
    attention of each row's last ``w`` fed queries (the newest last; rows of queries not yet seen
    are zero), or ``None``. ``attention_sum``: ``[B, Hkv, S]`` float32, the attention each token
    received from every query so far (prefill and fed), averaged over each KV group's query heads,
    or ``None``.
    """

    layer_idx: int
    keys: torch.Tensor
    values: torch.Tensor
    positions: torch.Tensor
    valid: torch.Tensor
    length: torch.Tensor
    reachable: torch.Tensor | None = None
    recent_attention: torch.Tensor | None = None
    attention_sum: torch.Tensor | None = None

    def per_kv_head(self, per_query_head: torch.Tensor) -> torch.Tensor:
        """Average ``[B, Hq, S]`` over each KV group's query heads -> ``[B, Hkv, S]`` (GQA)."""
        batch, kv_heads = self.keys.shape[:2]
        return per_query_head.view(batch, kv_heads, -1, per_query_head.shape[-1]).mean(dim=2)


@dataclass
class Scorer:
    """Base class. Subclasses set ``name`` and implement ``score``.

    ``sinks``: first tokens always kept; ``window``: last tokens always kept.
    ``capture``: the statistics the prefill must record for ``score`` (a ``CaptureSpec``;
    default: keys and values only).
    ``query_free``: the ranking ignores the queries, so it is valid when the question comes
    after compression (the query-agnostic setting); a query-aware scorer is refused there.
    """

    name: ClassVar[str] = ""
    query_free: ClassVar[bool] = True
    #: ranks a cache that holds generated tokens (``score_cached``): decode-time eviction can use it
    ranks_generated: ClassVar[bool] = False
    #: why it cannot (when ``ranks_generated`` is false), for the one-line refusal
    why_not_generated: ClassVar[str] = "it ranks a prompt once, after the prefill"
    #: decode-time eviction starts each token's accumulated attention (``decode_capture.attention_sum``)
    #: from the prefill's: from the scorer's own recorded scores (H2O: they are the sums), or, when its
    #: scores are something else (a learned policy's), from the sums the prefill records beside them
    #: (``records_prefill_sums``: ``PrefillRecord.scores[sums_key]``, in the ranking's order)
    records_prefill_sums: ClassVar[bool] = False
    sinks: int = 0
    window: int = 0

    @property
    def sums_key(self) -> str:
        """The record's scores that hold the prefill's accumulated attention, in ranking order."""
        return f"{self.key}#attention_sum" if self.records_prefill_sums else self.key

    @property
    def capture(self) -> CaptureSpec:
        return CaptureSpec()

    @property
    def decode_capture(self) -> CaptureSpec:
        """What decoding must observe for ``score_cached``: ``window_queries`` keeps the last ``w`` fed
        queries, ``attention_sum`` accumulates every fed query's attention (default: ``capture``)."""
        return self.capture

    @property
    def always_kept(self) -> int:
        return self.sinks + self.window

    @property
    def min_budget(self) -> int:
        """The least budget a (layer, KV head) may get with this scorer: its always-kept tokens, and
        one token at least (an empty head has nothing to attend to)."""
        return max(1, self.always_kept)

    def params(self) -> dict:
        """The scorer's settings, for provenance in allocation files."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def key(self) -> str:
        """Identifies the ranking: the name, plus every parameter that differs from its declared
        default or has none (a required one, such as learned's checkpoint)."""
        changed = {f.name: getattr(self, f.name) for f in fields(self) if _differs(f, getattr(self, f.name))}
        return self.name + ("(" + ",".join(f"{k}={v}" for k, v in sorted(changed.items())) + ")" if changed else "")

    def score(self, stats: LayerStats) -> torch.Tensor:
        """``[Hkv, L]`` importance: higher is kept first."""
        raise NotImplementedError

    def check_checkpoint(self, geometry: dict, model: dict | None = None) -> None:
        """A scorer that reads a trained checkpoint raises ``ValueError`` (one line) when it is
        missing, unreadable, or trained for another model geometry (or model, when ``model`` is
        given: ``runtime.policy.model_identity``). Heuristics have nothing to check."""

    def checkpoint_provenance(self) -> dict | None:
        """The checkpoint's fingerprint and training record (``checkpoint_file.checkpoint_provenance``)
        for every profile ranked with this scorer; ``None`` for a scorer without one."""
        return None

    def rank(self, stats: LayerStats) -> torch.Tensor:
        """``[Hkv, L]`` int64 positions, most important first; always-kept tokens lead."""
        return self.rank_scored(stats)[0]

    def rank_scored(self, stats: LayerStats) -> tuple[torch.Tensor, torch.Tensor]:
        """The ranking and the scores in ranking order: ``([Hkv, L]`` int64, ``[Hkv, L]`` float32).

        Always-kept tokens score ``+inf``. Budget adapters (``runtime.adaptive``: AdaKV, global
        top-k) compare these scores across heads to move budget where the scores are.
        """
        scores = self.score(stats).float()
        length = scores.shape[-1]
        position = torch.arange(length, device=scores.device, dtype=torch.float32)
        forced = (position < self.sinks) | (position >= length - self.window)
        # Lexicographic key (forced, score, position): forced first, then by score, ties to recency.
        # A stable sort by position and then by score keeps that order without float tricks.
        order = torch.argsort(position.expand_as(scores), dim=-1, descending=True, stable=True)
        by_score = torch.gather(scores, -1, order)
        order = torch.gather(order, -1, torch.argsort(by_score, dim=-1, descending=True, stable=True))
        by_forced = forced.expand_as(scores).gather(-1, order).to(torch.int8)
        order = torch.gather(order, -1, torch.argsort(by_forced, dim=-1, descending=True, stable=True))
        ranked = torch.gather(scores.masked_fill(forced, float("inf")), -1, order)
        return order, ranked

    def score_cached(self, stats: CachedStats) -> torch.Tensor:
        """``[B, Hkv, S]`` importance of cached tokens while decoding (``ranks_generated`` scorers)."""
        raise NotImplementedError(f"scorer {self.name!r} cannot rank generated tokens: {self.why_not_generated}")

    def rank_cached(self, stats: CachedStats) -> torch.Tensor:
        """``[B, Hkv, S]`` int64 slots of ``stats``, most important first: valid before invalid, a
        sliding layer's reachable before unreachable, then always-kept (the first ``sinks`` positions
        and the last ``window`` of the row's sequence), then by score, ties to recency."""
        scores = self.score_cached(stats).float().nan_to_num(nan=float("-inf"))
        position = stats.positions
        forced = (position < self.sinks) | (position >= stats.length[:, None, None] - self.window)
        # Sort keys, least significant first, each ascending; stable sorts keep the earlier keys' order.
        keys = [-position, -scores, ~forced]
        if stats.reachable is not None:
            keys.append(~stats.reachable)
        keys.append(~stats.valid)
        order = torch.argsort(keys[0], dim=-1, stable=True)
        for key in keys[1:]:
            key = key.to(torch.int8) if key.dtype == torch.bool else key
            order = torch.gather(order, -1, torch.argsort(torch.gather(key, -1, order), dim=-1, stable=True))
        return order


def _differs(spec, value) -> bool:
    if spec.default is not MISSING:
        return spec.default != value
    if spec.default_factory is not MISSING:
        return spec.default_factory() != value
    return True  # no default: always part of the key
