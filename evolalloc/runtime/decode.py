"""Greedy (or sampled) decoding on evicted caches, batched over (instance, allocation) rows.

Each row continues from its record's *original* positions (a cache shorter than the prompt must
not shift positions). The first answer token comes from the prefill's logits, exactly as after
a full prefill; in the query-agnostic setting the question is fed first as one chunk. Rows
leave the batch as soon as they finish (EOS, a stop string, or the token limit).

With a decode setting (``decode=``, ``core.decode_eviction.DecodeEviction``) the budgets are held
while decoding too: every forward reports the tokens it fed (``EvictedCache.after_forward``) and the
rows due are cut back to their budgets (``runtime/decode_eviction.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.runtime.cache import EvictedCache
from evolalloc.runtime.compress import compress_batch
from evolalloc.runtime.prefill import PrefillRecord
from evolalloc.runtime.sampling import sample
from evolalloc.runtime.scorers import Scorer


@dataclass
class Generation:
    """One row's answer. ``logits``: per generated token ``[V]`` (only when asked for)."""

    token_ids: list[int]
    text: str
    stopped_by: str  # "eos", "stop", or "length"
    logits: list[torch.Tensor] = field(default_factory=list)


@dataclass
class DecodeSettings:
    max_new_tokens: int = 16
    stop: tuple[str, ...] = ()
    eos_ids: tuple[int, ...] = ()
    keep_logits: bool = False
    # Sampling (``do_sample``): each row draws with its own generator (``decode_batch(generators=)``).
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0


def eos_ids_of(model, tokenizer) -> tuple[int, ...]:
    """End-of-sequence ids from the generation config and the tokenizer."""
    ids = set()
    gen = getattr(model, "generation_config", None)
    for source in (getattr(gen, "eos_token_id", None), getattr(tokenizer, "eos_token_id", None)):
        if isinstance(source, int):
            ids.add(source)
        elif source:
            ids.update(int(i) for i in source)
    return tuple(sorted(ids))


class _Rows:
    """Book-keeping for the rows still decoding."""

    def __init__(self, n: int, settings: DecodeSettings, tokenizer):
        self.settings, self.tokenizer = settings, tokenizer
        self.tokens: list[list[int]] = [[] for _ in range(n)]
        self.logits: list[list[torch.Tensor]] = [[] for _ in range(n)]
        self.stopped: list[str | None] = [None] * n

    def push(self, row: int, token: int, logits: torch.Tensor) -> None:
        self.tokens[row].append(token)
        if self.settings.keep_logits:
            self.logits[row].append(logits.detach().float().cpu())
        if token in self.settings.eos_ids:
            self.stopped[row] = "eos"
        elif self.settings.stop and self.tokenizer is not None and any(s in self._text(row)
                                                                       for s in self.settings.stop):
            self.stopped[row] = "stop"
        elif len(self.tokens[row]) >= self.settings.max_new_tokens:
            self.stopped[row] = "length"

    def _text(self, row: int) -> str:
        return self.tokenizer.decode(self.tokens[row], skip_special_tokens=True)

    def result(self, row: int) -> Generation:
        tokens = self.tokens[row]
        if self.stopped[row] == "eos":
            tokens = tokens[:-1]
        text = self.tokenizer.decode(tokens, skip_special_tokens=True) if self.tokenizer is not None else ""
        for stop in self.settings.stop:
            cut = text.find(stop)
            if cut >= 0:
                text = text[:cut]
        return Generation(self.tokens[row], text, self.stopped[row] or "length", self.logits[row])


@torch.no_grad()
def decode_batch(model, cache: EvictedCache, records: Sequence[PrefillRecord], settings: DecodeSettings, tokenizer=None,
                 generators: Sequence[torch.Generator] | None = None) -> list[Generation]:
    """Decode every row of ``cache`` (row ``i`` was compressed from ``records[i]``).

    Greedy unless ``settings.do_sample``; then row ``i`` samples with ``generators[i]``.
    """
    if settings.do_sample and (generators is None or len(generators) != len(records)):
        raise ValueError("sampling needs one torch.Generator per row (generators=...)")
    device = cache.keys[0].device
    n = len(records)
    rows = _Rows(n, settings, tokenizer)
    next_pos = torch.tensor([r.length for r in records], device=device)
    questions = [r.question_ids for r in records]

    if any(q is not None for q in questions):
        if not all(q is not None and len(q) > 0 for q in questions):
            raise ValueError("either every row or none has a question to feed after compression")
        logits = _feed_questions(model, cache, questions, next_pos)
        next_pos = next_pos + torch.tensor([len(q) for q in questions], device=device)
    else:
        logits = torch.stack([r.first_logits for r in records]).to(device)

    active = torch.arange(n, device=device)
    while True:
        if settings.do_sample:
            next_tokens = sample(logits, [generators[r] for r in active.tolist()], temperature=settings.temperature,
                                 top_k=settings.top_k, top_p=settings.top_p)
        else:
            next_tokens = logits.argmax(dim=-1)
        for i, row in enumerate(active.tolist()):
            rows.push(row, int(next_tokens[i]), logits[i])
        alive = torch.tensor([rows.stopped[r] is None for r in active.tolist()], device=device)
        if not bool(alive.any()):
            break
        if not bool(alive.all()):
            keep = alive.nonzero()[:, 0]
            cache.select_rows(keep)
            active, next_tokens, next_pos = active[keep], next_tokens[keep], next_pos[keep]
        out = model(
            input_ids=next_tokens[:, None],
            position_ids=next_pos[:, None],
            past_key_values=cache,
            use_cache=True,
            evolalloc_cache=cache,
        )
        logits = out.logits[:, -1].float()  # read before an eviction: it predicts from the cache it saw
        cache.after_forward(torch.ones_like(next_pos))
        next_pos = next_pos + 1
    return [rows.result(i) for i in range(n)]


def _feed_questions(model, cache: EvictedCache, questions, start: torch.Tensor) -> torch.Tensor:
    """Feed each row's question as one chunk after eviction; return logits ``[B, V]`` of its last token."""
    return feed_chunks(model, cache, questions, start, keep=1)[:, -1]


def feed_chunks(model, cache: EvictedCache, chunks, start: torch.Tensor, keep: int | None = None) -> torch.Tensor:
    """Feed each row's tokens as one chunk at positions ``start[i], start[i] + 1, ...``.

    ``chunks``: per row a ``[n_i]`` id tensor (``n_i >= 0``); ``start``: ``[B]`` original lengths.
    Chunks of different lengths are left-padded to the longest, ``W``; pad tokens are appended as
    invalid slots, so no real token ever sees them. Left padding puts every row's last token in
    the last column, so the logits of the last ``keep`` columns are the last ``keep`` tokens of
    every row (columns left of a short row's first token are padding).

    Returns float logits ``[B, keep, V]`` (``keep`` defaults to ``W``).
    """
    device = start.device
    width = max(len(c) for c in chunks)
    if width == 0:
        raise ValueError("feed_chunks needs at least one token in some row")
    ids = torch.zeros(len(chunks), width, dtype=torch.long, device=device)
    valid = torch.zeros(len(chunks), width, dtype=torch.bool, device=device)
    for i, c in enumerate(chunks):
        if len(c):
            ids[i, width - len(c) :] = torch.as_tensor(c, device=device)
            valid[i, width - len(c) :] = True
    offsets = torch.arange(width, device=device)[None, :] - (width - valid.sum(dim=1, keepdim=True))
    positions = start[:, None] + offsets.clamp(min=0)
    cache.mark_next_chunk(None if bool(valid.all()) else valid)
    try:
        out = model(input_ids=ids, position_ids=positions, past_key_values=cache, use_cache=True,
                    evolalloc_cache=cache, logits_to_keep=min(keep or width, width))
    finally:
        cache.mark_next_chunk(None)
    cache.after_forward(valid.sum(dim=1))
    return out.logits.float()


def build_cache(model, rows: Sequence[tuple[PrefillRecord, np.ndarray]], scorer: Scorer, room: int,
                decode: DecodeEviction | None = None):
    """The evicted cache of (record, budgets) rows: ``(rows, cache)``.

    For a windowed-attention scorer (TensorRT-LLM semantics) each row is first prefilled again
    under its windows, so the returned rows hold those records. ``room``: the most tokens that will
    be fed; with ``decode`` the cache holds its budgets while they are (its buffers sized for that).
    """
    if decode is not None:
        from evolalloc.runtime.decode_eviction import held_cache

        questions = max((len(r.question_ids) for r, _ in rows if r.question_ids is not None), default=0)
        return rows, held_cache(model, rows, scorer, decode, most=room, fed_at_once=questions)
    if not getattr(scorer, "windowed_attention", False):
        return rows, compress_batch(rows, scorer, room=room)
    from evolalloc.runtime.windowed import set_cache_windows, windowed_record

    rows = [(windowed_record(model, record, budgets, scorer), budgets) for record, budgets in rows]
    cache = compress_batch(rows, scorer, room=room)
    set_cache_windows(cache, rows)
    return rows, cache


def generate(
    model,
    rows: Sequence[tuple[PrefillRecord, np.ndarray]],
    scorer: Scorer,
    settings: DecodeSettings,
    tokenizer=None,
    batch_size: int = 16,
    decode: DecodeEviction | None = None,
) -> list[Generation]:
    """Compress and decode (record, budgets) rows, ``batch_size`` rows per forward; with ``decode`` the
    budgets are held while decoding (``runtime/decode_eviction.py``)."""
    results: list[Generation] = []
    room = settings.max_new_tokens + max((len(r.question_ids) for r, _ in rows if r.question_ids is not None),
                                         default=0)
    for start in range(0, len(rows), batch_size):
        # Named ranges: a profile (``bench gpu --profile``) splits the time into compression and decoding.
        with torch.profiler.record_function("evolalloc.compress"):
            chunk, cache = build_cache(model, rows[start : start + batch_size], scorer, room, decode)
        with torch.profiler.record_function("evolalloc.decode"):
            results.extend(decode_batch(model, cache, [r for r, _ in chunk], settings, tokenizer))
    return results
