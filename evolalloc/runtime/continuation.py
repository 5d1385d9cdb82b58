"""The full cache's own continuation of a prompt: what the fidelity fitness, and the tasks judged
against the full cache (``fitness.Task.judged_against_full_cache``), read a compressed cache against.

For one prefilled instance the full cache (every budget the prompt's length: nothing evicted) writes
greedily up to ``max_new_tokens`` tokens — the instance's stop strings or the model's end-of-sequence
token end it earlier, and an end-of-sequence token it writes is one of its tokens — and those very
tokens are then scored teacher-forced under the full cache (``runtime/likelihood.py``, one forward).

Made once per record and decoding settings, and kept on the record (``PrefillRecord.continuations``),
one record at a time: a batch of one does not depend on how an evaluator batches, shards or orders
its instances, so every engine and every process writes the same tokens (a batched decode can differ
in float rounding, and a near-tie can then flip a token).

How a candidate is scored against it: ``runtime/fidelity.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from evolalloc.runtime.decode import DecodeSettings, generate
from evolalloc.runtime.likelihood import reference_logprobs_batch
from evolalloc.runtime.prefill import PrefillRecord
from evolalloc.runtime.scorers import Scorer


@dataclass(frozen=True)
class Continuation:
    """The full cache's greedy continuation: ``token_ids`` ``[n]`` int64 (``1 <= n <= max_new_tokens``),
    its ``text`` (stop string and end-of-sequence token cut, as an answer's), and ``full_logprobs``
    ``[n]`` float32, each token's teacher-forced log-probability under the full cache."""

    token_ids: torch.Tensor
    text: str
    full_logprobs: torch.Tensor


def settings_key(settings: DecodeSettings) -> tuple:
    """What a continuation depends on besides the record: its length limit, stop strings, end tokens."""
    return settings.max_new_tokens, tuple(settings.stop), tuple(settings.eos_ids)


def full_budgets(record: PrefillRecord) -> np.ndarray:
    """``[num_layers, Hkv]`` budgets that keep every prompt token of ``record``."""
    return np.full((record.num_layers, record.kv_shapes()[0][0]), record.length, dtype=np.int64)


def full_continuation(model, record: PrefillRecord, scorer: Scorer, settings: DecodeSettings,
                      tokenizer) -> Continuation:
    """Greedy-decode ``record`` under the full cache, then score those tokens teacher-forced under it.

    ``record`` must be whole (not bounded); ``scorer`` any plain scorer whose ranking it holds (with
    nothing evicted every ranking keeps the same tokens, in position order).
    """
    budgets = full_budgets(record)
    [generation] = generate(model, [(record, budgets)], scorer, settings, tokenizer, batch_size=1)
    ids = torch.tensor(generation.token_ids, dtype=torch.long)
    [full] = reference_logprobs_batch(model, [(record, budgets, ids)], scorer)
    return Continuation(ids, generation.text, full.float())


def continuation_of(model, record: PrefillRecord, whole: Callable[[], PrefillRecord], scorer: Scorer,
                    settings: DecodeSettings, tokenizer) -> Continuation:
    """``record``'s continuation under ``settings``, written first (from ``whole()``: the record, or
    for a bounded one the instance prefilled again in full) when the record keeps none yet."""
    key = settings_key(settings)
    if key not in record.continuations:
        record.continuations[key] = full_continuation(model, whole(), scorer, settings, tokenizer)
    return record.continuations[key]

