"""A task's instances into prefill records: tokenizing an instance, and prefilling a list of them.

Shared by the experiment, the engines' workers, curation and the benchmarks. The single check that
a prompt fits the model's positions (``runtime/positions.py``) is applied here, once per instance,
before any work on it.
"""

from __future__ import annotations

import sys
from typing import Sequence

from tqdm.auto import tqdm

from evolalloc.core.phases import announce
from evolalloc.runtime.heap import give_back
from evolalloc.runtime.model import LoadedModel
from evolalloc.runtime.positions import positions_beyond
from evolalloc.runtime.prefill import PrefillRecord, prefill
from evolalloc.runtime.record_store import RecordKeeper
from evolalloc.runtime.scorers import Scorer

#: ``bound`` left to the keeper's policy (``prefill_instances``): a Ray worker's policy is its split's.
POLICY_BOUND = "policy"

#: Prefills between two returns of freed memory to the system (``runtime/heap.py``): a prefill
#: frees ~0.1 GB of activations at 1k tokens, and the trim costs a walk of the heap.
_TRIM_EVERY = 8


def tokenize_instance(tokenizer, instance, question_after_compression: bool):
    """Token ids to prefill and (query-agnostic setting) the question ids fed after eviction."""
    if not question_after_compression:
        return tokenizer.encode(instance.prompt), None
    question = tokenizer.encode(instance.question, add_special_tokens=False) if instance.question else []
    if not question:
        raise ValueError(f"instance {instance.uid} has no question to feed after compression")
    return tokenizer.encode(instance.context), question


def prefill_instances(loaded: LoadedModel, instances, scorers: Sequence[Scorer], *, question_after_compression=False,
                      progress=False,
                      keeper: RecordKeeper | None = None, bound: int | None | str = POLICY_BOUND,
                      hold: bool = True) -> list[PrefillRecord]:
    """One prefill record per instance (the expensive step, done once per worker).

    ``keeper``: bounds each record at ``bound``, stores it in the policy's dtype and spills it when
    the records outgrow their memory (``runtime/record_store.py``); a record spilled by an earlier
    process under the same content is re-used, not prefilled. ``None``: full records in memory.
    ``bound``: the ``b_max`` to keep, ``None`` for whole records (as an unbounded ``RecordPolicy``
    says it: a full-cache judgment's, e.g. curation's); by default the keeper policy's own.
    ``hold=False``: spill every record even while the keeper has memory left (``RecordKeeper.keep``).
    """
    records = []
    scorer_keys = [s.key for s in scorers]
    if keeper is None:
        bound = None
    elif bound == POLICY_BOUND:
        bound = keeper.policy.bound
    for done, instance in enumerate(tqdm(instances, desc="prefill", unit="prompt", disable=not progress)):
        announce("prefilling", done, len(instances))
        ids, question = tokenize_instance(loaded.tokenizer, instance, question_after_compression)
        limit = loaded.geometry.max_positions
        if positions_beyond(limit, len(ids), len(question or []), instance.max_new_tokens):
            raise ValueError(f"instance {instance.uid} needs {len(ids)} prompt "
                             f"tokens, beyond the model's {limit} positions")
        if keeper is not None:
            found = keeper.reuse(ids, question, scorer_keys, bound, device=next(loaded.model.parameters()).device)
            if found is not None:
                records.append(found)
                continue
        record = prefill(loaded.model, ids, scorers, uid=instance.uid, question_ids=question)
        records.append(keeper.keep(record, scorer_keys, bound, hold=hold) if keeper is not None else record)
        if len(records) % _TRIM_EVERY == 0:
            give_back(collect=False)  # freed activations pile up in the allocator over many prefills
    if keeper is not None:
        for note in keeper.notes:
            tqdm.write(note, file=sys.stderr)
        keeper.notes.clear()
    # The prefills' activations (and records spilled since) were freed but stay resident in the
    # allocator: give them back before these records are evaluated (runtime/heap.py).
    give_back()
    return records
