"""Teacher-forced scoring under decode-time eviction: a given continuation, fed as generation would.

``runtime/likelihood.py`` compresses the prompt and feeds a reference as *one* chunk: right for
prompt-only eviction, where the cache simply grows. When the budgets are held while decoding
(``runtime/decode_eviction.py``), generation evicts every ``interval`` tokens, so the continuation
is fed here in pieces that end exactly where generation's evictions fall, with the same evictions
between them: the log-probabilities are the ones generation would have computed had it produced
those tokens (a test holds that), one forward per ``interval`` tokens instead of one per token.

Where each token's logits come from is ``likelihood.py``'s rule: with ``t = question + reference``
following the prompt, the prefill's ``first_logits`` predict ``t[0]``, and feeding ``t[j]``
predicts ``t[j + 1]``; ``t[:-1]`` is fed. A question is fed whole (as ``decode_batch`` feeds it),
and counts towards the first eviction like any fed token.
"""

from __future__ import annotations

from typing import Sequence

import torch

from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.runtime.decode import feed_chunks
from evolalloc.runtime.decode_eviction import held_cache
from evolalloc.runtime.likelihood import Row, TeacherForced, token_logprobs_and_top1
from evolalloc.runtime.scorers import Scorer


@torch.no_grad()
def held_logprobs_batch(model, rows: Sequence[Row], scorer: Scorer, decode: DecodeEviction, *,
                        distribution: bool = False) -> list[TeacherForced]:
    """Teacher-force each row's continuation with its budgets held while decoding, all rows in one cache.

    ``rows``: ``(record, budgets, continuation)``: a ``PrefillRecord``, budgets ``[layers]`` or
    ``[layers, kv_heads]`` and the continuation's token ids ``[r]`` (``r >= 1``, e.g. the full cache's
    greedy tokens); rows may differ in prompt, budgets, question and length. ``scorer`` must rank
    generated tokens (``ValueError`` otherwise). Returns one ``TeacherForced`` per row, in order.
    With budgets that hold every token it equals ``likelihood.reference_logprobs_batch``.
    """
    if not rows:
        return []
    references = [torch.as_tensor(ref, dtype=torch.long).reshape(-1) for _, _, ref in rows]
    if any(len(ref) == 0 for ref in references):
        raise ValueError("a reference must have at least one token")
    records = [record for record, _, _ in rows]
    questions = [record.question_ids for record in records]
    if any(q is not None for q in questions) and not all(q is not None and len(q) > 0 for q in questions):
        raise ValueError("either every row or none has a question to feed after compression")
    device = records[0].first_logits.device
    asked = [torch.cat([q.to(device) if q is not None else ref.new_empty(0).to(device), ref.to(device)])
             for q, ref in zip(questions, references)]  # t = question + reference, per row
    asked_q = [len(q) if q is not None else 0 for q in questions]
    # Per row, as pieces come: the log-probabilities of its reference tokens (and the whole rows if asked).
    tokens: list[list[torch.Tensor]] = [[] for _ in rows]
    top1: list[list[torch.Tensor]] = [[] for _ in rows]
    whole: list[list[torch.Tensor]] = [[] for _ in rows]

    def take(i: int, logits: torch.Tensor, first_ref: int) -> None:  # logits [n, V] predict ref[first_ref:]
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        ref = references[i][first_ref : first_ref + logits.shape[0]].to(logprobs.device)
        picked, hit = token_logprobs_and_top1(logprobs, ref)
        tokens[i].append(picked.cpu())
        top1[i].append(hit.cpu())
        if distribution:
            whole[i].append(logprobs.cpu())

    for i, record in enumerate(records):
        if asked_q[i] == 0:  # no question: the prefill predicts the first reference token
            take(i, record.first_logits.reshape(1, -1), 0)
    fed = [0] * len(rows)  # tokens of t fed so far, per row
    active = [i for i in range(len(rows)) if len(asked[i]) > 1 or asked_q[i] > 0]
    if active:
        most = max(len(asked[i]) - 1 for i in active)
        # Rows fed pieces of different lengths get padding columns, dropped at their next eviction: at most
        # the question's and one interval's (every row still going is due after each piece but its last).
        cache = held_cache(model, [(records[i], rows[i][1]) for i in active], scorer, decode, most=most,
                           fed_at_once=max(asked_q), padding=max(asked_q) + decode.interval)
        start = torch.tensor([records[i].length for i in active], device=device)
        while active:
            pieces = [asked[i][fed[i] : fed[i] + _piece(fed[i], asked_q[i], int(cache.held.since[k]), decode,
                                                        len(asked[i]) - 1)]
                      for k, i in enumerate(active)]
            logits = feed_chunks(model, cache, pieces, start)  # [B, W, V]; evicts the rows now due
            for k, (i, piece) in enumerate(zip(active, pieces)):
                n = len(piece)
                # Fed token t[j] predicts t[j + 1]: keep those predicting reference tokens (j + 1 >= q).
                first = max(0, asked_q[i] - 1 - fed[i])
                if first < n:
                    take(i, logits[k, logits.shape[1] - n + first :], fed[i] + first + 1 - asked_q[i])
                fed[i] += n
            start = start + torch.tensor([len(p) for p in pieces], device=device)
            going = [k for k, i in enumerate(active) if fed[i] < len(asked[i]) - 1]
            if len(going) < len(active):
                if going:
                    cache.select_rows(torch.tensor(going, dtype=torch.long, device=device))
                start = start[going]
                active = [active[k] for k in going]
    return [TeacherForced(torch.cat(tokens[i]), torch.cat(top1[i]), torch.cat(whole[i]) if distribution else None)
            for i in range(len(rows))]


def _piece(fed: int, question: int, since: int, decode: DecodeEviction, total: int) -> int:
    """How many tokens a row is fed next: its whole question first, then up to its next eviction."""
    if fed < question:
        return question
    return min(decode.interval - since, total - fed)


def held_logprobs(model, rows: Sequence[Row], scorer: Scorer, decode: DecodeEviction, *, batch_size: int = 16,
                  distribution: bool = False) -> list[TeacherForced]:
    """``held_logprobs_batch`` over ``batch_size`` rows per forward."""
    out: list[TeacherForced] = []
    for start in range(0, len(rows), batch_size):
        out.extend(held_logprobs_batch(model, rows[start : start + batch_size], scorer, decode,
                                       distribution=distribution))
    return out
