"""Teacher-forced scoring on evicted caches: how much probability a compressed model gives a reference.

For each (record, budgets, reference) row the record is compressed exactly as for decoding
(``compress_batch``), then the reference's tokens are fed as *one* chunk at the record's original
positions, and the log-probability of every reference token is read off — no decode loop, one
batched forward per ``batch_size`` rows.

Where each reference token's logits come from. Let ``t = question + reference`` be what follows
the prefilled tokens (``question`` is empty unless the question is fed after compression). The
logits that predict ``t[0]`` are the record's ``first_logits`` (what the prefill predicted after
its last token); those that predict ``t[j]`` (``j >= 1``) come from feeding ``t[:-1]`` as one chunk.
So with a question the chunk is ``question + reference[:-1]``; without one it is
``reference[:-1]`` and a one-token reference needs no forward at all.

The per-instance score built on these (``reference_score``) is the mean per-token probability;
see its docstring for why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from evolalloc.runtime.compress import compress_batch
from evolalloc.runtime.decode import feed_chunks
from evolalloc.runtime.prefill import PrefillRecord
from evolalloc.runtime.scorers import Scorer

# One row: a prefilled instance, an allocation ([num_layers] or [num_layers, num_kv_heads]) and
# the reference's token ids [r] (r >= 1).
Row = tuple[PrefillRecord, np.ndarray, torch.Tensor]


@dataclass
class TeacherForced:
    """One row's reference, teacher-forced under a compressed cache.

    ``token_logprobs``: ``[r]`` float32, the log-probability of each of its ``r`` tokens;
    ``top1``: ``[r]`` bool, whether each token is the compressed model's most likely one there (what
    greedy decoding would have written, given the reference's tokens before it);
    ``logprobs``: ``[r, V]`` float32, the whole log-softmax predicting each token (only when asked,
    ``runtime/held_likelihood.py``'s ``distribution=True``), e.g. for a KL divergence to the full cache's.
    """

    token_logprobs: torch.Tensor
    top1: torch.Tensor
    logprobs: torch.Tensor | None = None


def token_logprobs_and_top1(logprobs: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """From ``logprobs`` ``[n, V]`` and the ``[n]`` tokens they predict: each token's log-probability
    ``[n]`` and whether it is the row's maximum ``[n]`` (a tie with another token counts as a hit)."""
    picked = logprobs.gather(1, tokens[:, None])[:, 0]
    return picked, picked >= logprobs.max(dim=1).values


@torch.no_grad()
def reference_logprobs_batch(model, rows: Sequence[Row], scorer: Scorer) -> list[torch.Tensor]:
    """Log-probabilities ``[r_i]`` (float32) of each row's reference tokens, all rows in one cache.

    Rows may differ in prompt length, budgets, question and reference length.
    """
    return [forced.token_logprobs for forced in reference_forced_batch(model, rows, scorer)]


@torch.no_grad()
def reference_forced_batch(model, rows: Sequence[Row], scorer: Scorer) -> list[TeacherForced]:
    """``reference_logprobs_batch``, with each token's ``top1`` beside its log-probability."""
    if not rows:
        return []
    references = [torch.as_tensor(ref, dtype=torch.long).reshape(-1) for _, _, ref in rows]
    if any(len(ref) == 0 for ref in references):
        raise ValueError("a reference must have at least one token")
    questions = [r.question_ids for r, _, _ in rows]
    if any(q is not None for q in questions) and not all(q is not None and len(q) > 0 for q in questions):
        raise ValueError("either every row or none has a question to feed after compression")
    if getattr(scorer, "windowed_attention", False):  # TensorRT-LLM semantics: prefill again under the windows
        from evolalloc.runtime.windowed import windowed_record

        rows = [(windowed_record(model, r, b, scorer), b, ref) for r, b, ref in rows]
    records = [r for r, _, _ in rows]
    device = records[0].first_logits.device
    chunks = []
    for record, ref in zip(records, references):
        question = record.question_ids.to(device) if record.question_ids is not None else ref.new_empty(0).to(device)
        chunks.append(torch.cat([question, ref.to(device)])[:-1])
    # Reference tokens whose logits come from the chunk: all of them after a question, else all
    # but the first (that one's logits are first_logits).
    from_chunk = [len(ref) if record.question_ids is not None else len(ref) - 1
                  for record, ref in zip(records, references)]
    keep = max(from_chunk)
    chunk_logp = None
    if keep > 0:
        cache = compress_batch([(r, b) for r, b, _ in rows], scorer, room=max(len(c) for c in chunks))
        if getattr(scorer, "windowed_attention", False):
            from evolalloc.runtime.windowed import set_cache_windows

            set_cache_windows(cache, [(r, b) for r, b, _ in rows])
        start = torch.tensor([r.length for r in records], device=device)
        # Left padding aligns every row's last token to the last column: the last `keep` columns
        # hold the logits of every row's last `from_chunk[i]` chunk positions.
        chunk_logp = torch.log_softmax(feed_chunks(model, cache, chunks, start, keep=keep), dim=-1)
    out = []
    for i, (record, ref) in enumerate(zip(records, references)):
        ref = ref.to(device)
        parts = []
        if from_chunk[i] < len(ref):  # no question: the first token is predicted by the prefill
            parts.append(token_logprobs_and_top1(torch.log_softmax(record.first_logits.float(), dim=-1).reshape(1, -1),
                                                 ref[:1]))
        if from_chunk[i] > 0:
            logp = chunk_logp[i, keep - from_chunk[i] :]  # [from_chunk, V]
            parts.append(token_logprobs_and_top1(logp, ref[len(ref) - from_chunk[i] :]))
        out.append(TeacherForced(torch.cat([p for p, _ in parts]).cpu(), torch.cat([t for _, t in parts]).cpu()))
    return out


def reference_logprobs(model, rows: Sequence[Row], scorer: Scorer, batch_size: int = 16) -> list[torch.Tensor]:
    """``reference_logprobs_batch`` over ``batch_size`` rows per forward."""
    out: list[torch.Tensor] = []
    for start in range(0, len(rows), batch_size):
        out.extend(reference_logprobs_batch(model, rows[start : start + batch_size], scorer))
    return out


def reference_score(logprobs: torch.Tensor) -> float:
    """Mean per-token probability of one reference, in [0, 1].

    Why this score: it is the expected share of reference tokens the compressed model gets right
    when each token is drawn from its teacher-forced distribution — a smooth stand-in for "how
    many digits of the key are right" without exact match's cliff, bounded like every other
    common score (so fitness stays a mean over instances and tasks). The mean log-probability
    was rejected: it is unbounded below, so one token the model considers impossible dominates
    a whole population's ranking. A gap to the full cache differs from the log-probability only
    by a per-instance constant (the full cache's own log-probability), so mapped to [0, 1] it
    mostly re-weights the instances the full model is unsure of, at the cost of a full pass.
    """
    return float(logprobs.double().exp().mean())


def best_reference_score(per_reference: Sequence[torch.Tensor]) -> float:
    """Several acceptable references: the instance scores as its best one."""
    if not per_reference:
        raise ValueError("an instance needs at least one reference")
    return max(reference_score(lp) for lp in per_reference)
