"""Decode-time eviction: a profile's budgets held while the model writes.

The prompt is compressed as always (``runtime/compress.py``); then, while tokens are fed (generated
tokens one per step, a question or a teacher-forced continuation in chunks), each row counts the
tokens appended since its last eviction, and when that reaches ``interval``
(``core.decode_eviction.DecodeEviction``) every (layer, KV head) of the row is cut back to its
budget: the scorer ranks what is cached, prompt and generated tokens alike (``Scorer.rank_cached``
on ``CachedStats``), and the top ``b`` stay, in position order, at their original positions.

Memory, exactly: between two forwards a (layer, KV head) stores at most ``b + interval - 1`` valid
tokens (``b`` itself with ``interval = 1``, once the sequence is longer than ``b``); during a forward
its attention sees those plus the tokens fed. The buffers are sized once for that, not for the
output length (``held_room``). The budgets held are the row's budgets after its adapter (AdaKV ...),
never clipped to the prompt (a head whose budget exceeds the prompt grows into it), and a sliding
layer holds at most ``W - 1`` (what it can attend to).

Exactness: a layer is only rearranged when a row due for eviction holds more than its budget in
some head of it (or holds padding), so budgets that hold everything change nothing and the tokens
are transformers' own. Rows are independent: a row's kept set never depends on the batch.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.core.geometry import window_cap
from evolalloc.runtime.cache import EvictedCache
from evolalloc.runtime.compress import gather_slots, row_budgets
from evolalloc.runtime.online_capture import OnlineCapture
from evolalloc.runtime.prefill import PrefillRecord
from evolalloc.runtime.scorers import SCORERS, Scorer
from evolalloc.runtime.scorers.base import CachedStats

_FAR = torch.iinfo(torch.int64).max  # sorts an invalid slot after every position


def check_decode_scorer(scorer: Scorer) -> None:
    """``ValueError`` (one line) unless ``scorer`` can rank generated tokens (``Scorer.ranks_generated``)."""
    if not scorer.ranks_generated:
        able = sorted(name for name in SCORERS.load_all() if SCORERS.get(name).ranks_generated)
        raise ValueError(f"scorer {scorer.name!r} cannot rank generated tokens ({scorer.why_not_generated}), so it "
                         f"cannot hold budgets while decoding; scorers that can: {', '.join(able)}")


def held_budgets(rows: Sequence[tuple[PrefillRecord, np.ndarray]], scorer: Scorer,
                 windows: Sequence[int | None]) -> np.ndarray:
    """int64 ``[B, layers, Hkv]``: what each row holds while decoding (its adapted budgets, a sliding
    layer's at most ``W - 1``)."""
    caps = np.array([np.iinfo(np.int64).max if window_cap(w) is None else window_cap(w) for w in windows])
    return np.stack([np.minimum(row_budgets(record, budgets, scorer), caps[:, None]) for record, budgets in rows])


def held_room(rows: Sequence[tuple[PrefillRecord, np.ndarray]], held: np.ndarray, decode: DecodeEviction,
              fed_at_once: int, most: int, padding: int = 0) -> int:
    """Slots a compressed cache needs beyond its prompt slots while holding ``held`` ``[B, layers, Hkv]``:
    what a head may still grow into its budget (a prompt shorter than it), plus the most tokens appended
    before an eviction (``interval``, or ``fed_at_once`` tokens of a chunk such as a question), never
    more than ``most`` (the tokens that will be fed at all), plus ``padding``: the most padding columns
    appended to a row before the eviction that drops them (chunks of different lengths batched)."""
    grow = max(int(np.max(held[i].max(axis=1) - np.minimum(held[i].max(axis=1), record.layer_reach())))
               for i, (record, _) in enumerate(rows))
    return min(most, grow + decode.interval + fed_at_once) + padding


class HeldBudgets:
    """The decode-time eviction state of one evicted cache (``cache.held``): per row its budgets
    ``[B, layers, Hkv]`` and the tokens fed since its last eviction, and what is observed online."""

    def __init__(self, scorer: Scorer, decode: DecodeEviction, budgets: torch.Tensor, windows: Sequence[int | None]):
        check_decode_scorer(scorer)
        self.scorer, self.decode, self.budgets = scorer, decode, budgets
        self.windows = list(windows)
        self.since = torch.zeros(budgets.shape[0], dtype=torch.long, device=budgets.device)
        self.capture = OnlineCapture(scorer.decode_capture, len(self.windows))
        self.evictions = 0  # rounds in which some row was due (for tests and reports)

    def observe(self, cache: EvictedCache, layer: int, query, key, visible, scaling: float, sliding, softcap,
                positions: torch.Tensor) -> None:
        """Called by the attention function after a forward's attention in ``layer`` (new keys appended):
        extends the slots' positions with the new tokens' and records what the scorer needs."""
        known = cache.positions[layer]
        fresh = cache.used[layer] - known.shape[-1]
        if fresh > 0:  # a sliding layer's mask may have appended them already (runtime/sliding.py)
            new = positions[:, None, -fresh:].to(known.device).expand(known.shape[0], known.shape[1], -1)
            cache.positions[layer] = torch.cat([known, new], dim=-1)
        self.capture.observe(layer, query, key, visible, scaling, sliding, softcap, positions,
                             cache._pending_valid)

    def after_forward(self, cache: EvictedCache, fed: torch.Tensor) -> None:
        """Rows were fed ``fed`` ``[B]`` tokens by the forward that just ran: evict the rows now due."""
        self.since += fed.to(self.since.device)
        due = self.since >= self.decode.interval
        if bool(due.any()):
            self.evictions += 1
            for layer in range(len(cache.keys)):
                self._evict_layer(cache, layer, due)
            self.since[due] = 0

    def select_rows(self, rows: torch.Tensor) -> None:
        rows = rows.to(self.budgets.device)
        self.budgets, self.since = self.budgets.index_select(0, rows), self.since.index_select(0, rows)
        self.capture.select_rows(rows)

    def _evict_layer(self, cache: EvictedCache, layer: int, due: torch.Tensor) -> None:
        """Cut the due rows of one layer back to their budgets; every row's padding goes too."""
        n = cache.used[layer]
        keys = cache.keys[layer]  # [B, Hkv, slots, D], the first n in use
        valid = cache.valid[layer]
        valid = torch.ones(*keys.shape[:2], n, dtype=torch.bool, device=keys.device) if valid is None else valid
        counts = valid.sum(dim=-1)  # [B, Hkv]
        limit = torch.where(due[:, None], self.budgets[:, layer], counts)  # rows not due keep what they hold
        if not bool((counts > limit).any()) and bool(valid.all()):
            return  # nothing over budget, no padding: the layer stays exactly as it is
        positions = cache.positions[layer]
        view = torch.argsort(positions.masked_fill(~valid, _FAR), dim=-1, stable=True)  # valid first, in order
        stats = self._stats(layer, cache.keys[layer], cache.values[layer], positions, valid, view)  # whole buffers
        ranking = self.scorer.rank_cached(stats)  # slots of the view, best first
        kept = torch.minimum(limit, counts)  # [B, Hkv]
        width = int(kept.max())
        chosen = torch.arange(n, device=keys.device) < kept[..., None]
        order = stats.positions.gather(-1, ranking).masked_fill(~chosen, _FAR).argsort(dim=-1)[..., :width]
        slots = view.gather(-1, ranking.gather(-1, order))  # [B, Hkv, width]: old slots, by position
        fresh_valid = torch.arange(width, device=keys.device) < kept[..., None]
        # Gathered from the whole buffers (contiguous; every slot read is below ``n``) before either is written.
        cache.keys[layer][:, :, :width] = gather_slots(cache.keys[layer], slots) * fresh_valid[..., None]
        cache.values[layer][:, :, :width] = gather_slots(cache.values[layer], slots) * fresh_valid[..., None]
        cache.positions[layer] = positions.gather(-1, slots)
        cache.valid[layer] = None if bool(fresh_valid.all()) else fresh_valid
        cache.used[layer] = width
        self.capture.compact(layer, slots)

    def _stats(self, layer: int, keys, values, positions, valid, view) -> CachedStats:
        """The layer as the scorer sees it: each (row, head)'s slots in position order, valid first."""
        keys, values = gather_slots(keys, view), gather_slots(values, view)
        positions, valid = positions.gather(-1, view), valid.gather(-1, view)
        length = positions.masked_fill(~valid, -1).amax(dim=(1, 2)) + 1  # [B]: the newest token is cached
        cap = window_cap(self.windows[layer])
        reachable = None if cap is None else positions >= length[:, None, None] - cap
        sums = self.capture.sums[layer]
        return CachedStats(layer_idx=layer, keys=keys, values=values, positions=positions, valid=valid, length=length,
                           reachable=reachable, recent_attention=self.capture.recent_attention(layer, keys, positions,
                                                                                               valid),
                           attention_sum=None if sums is None else sums.gather(-1, view))


def hold_budgets(cache: EvictedCache, rows: Sequence[tuple[PrefillRecord, np.ndarray]], scorer: Scorer,
                 decode: DecodeEviction, windows: Sequence[int | None], held: np.ndarray | None = None) -> HeldBudgets:
    """Attach decode-time eviction to ``cache`` (compressed from ``rows`` with ``track_positions``).
    ``held``: ``held_budgets(rows, scorer, windows)`` when the caller has it already."""
    if cache.positions is None:
        raise ValueError("decode-time eviction needs a cache that tracks positions (compress_batch(track_positions=))")
    held = held_budgets(rows, scorer, windows) if held is None else held
    state = HeldBudgets(scorer, decode, torch.as_tensor(held, device=cache.keys[0].device), windows)
    if scorer.decode_capture.attention_sum:
        for layer, sums in enumerate(prefill_sums(rows, scorer, cache.positions)):
            state.capture.seed_sums(layer, sums)
    cache.held = state
    return state


def prefill_sums(rows: Sequence[tuple[PrefillRecord, np.ndarray]], scorer: Scorer,
                 positions: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Per layer ``[B, Hkv, S_l]``: the prefill's accumulated attention (the records' scores under
    ``scorer.sums_key``) of the cached prompt tokens at ``positions`` (per layer ``[B, Hkv, S_l]``). The
    prompt's always-kept tokens have no recorded sum (their score is ``+inf``): they start at their head's
    largest recorded one, so the first eviction orders the prompt as the prefill did; from there they compete
    on what they receive."""
    per_row = []
    for record, _ in rows:
        scores = record.scores.get(scorer.sums_key)
        if scores is None:
            raise ValueError(f"record {record.uid!r} holds no scores for scorer {scorer.sums_key!r}; prefill it again")
        ranked = scores.float()  # [layers, Hkv, R], best first
        finite = ranked.masked_fill(~torch.isfinite(ranked), float("-inf"))
        ceiling = finite.amax(dim=-1, keepdim=True).clamp_min(0.0).expand_as(ranked)
        ranked = torch.where(torch.isposinf(ranked), ceiling, ranked.clamp_min(0.0))  # -inf (unreachable): 0
        by_position = ranked.new_zeros(*ranked.shape[:2], record.length)
        at = record.positions_of(record.rankings[scorer.key]).to(ranked.device)  # [layers, Hkv, R]
        per_row.append(by_position.scatter_(-1, at, ranked))
    out = []
    for layer, where in enumerate(positions):
        sums = [table[layer].gather(-1, where[row].clamp(0, table.shape[-1] - 1).to(table.device))
                for row, table in enumerate(per_row)]
        out.append(torch.stack(sums).to(where.device))
    return out


def held_cache(model, rows: Sequence[tuple[PrefillRecord, np.ndarray]], scorer: Scorer, decode: DecodeEviction, *,
               most: int, fed_at_once: int = 0, padding: int = 0) -> EvictedCache:
    """The rows compressed as always, in a cache that holds their budgets while at most ``most`` tokens
    are fed (at most ``fed_at_once`` of them in one chunk before an eviction: a question; ``padding``:
    see ``held_room``)."""
    from evolalloc.runtime.compress import compress_batch
    from evolalloc.runtime.support import sliding_windows

    check_decode_scorer(scorer)
    windows = sliding_windows(model.config)
    held = held_budgets(rows, scorer, windows)
    room = held_room(rows, held, decode, fed_at_once, most, padding)
    cache = compress_batch(rows, scorer, room=room, track_positions=True)
    hold_budgets(cache, rows, scorer, decode, windows, held)
    return cache
