"""The in-process evaluator: prefill each task instance once, then score any allocation.

``LocalEvaluator.evaluate(budgets)`` scores every (instance, allocation) row on cached prefill
records, batched, in one of the fitness modes (``fitness.FITNESS_MODES``):

* ``generate``: greedy-decode the answer, score it with the task's metric (the paper's path,
  and what ``compare`` and every report use);
* ``graded``: the same answer, scored with the task's graded score (partial credit);
* ``likelihood``: no decoding; the mean probability the compressed model gives each of the
  task's reference continuations, teacher-forced in one chunk (``runtime.likelihood``), the best
  continuation counting;
* ``fidelity``: no decoding and no labels; the compressed model's teacher-forced log-likelihood of
  the full cache's own greedy continuation, as a share of the full cache's (``runtime.continuation``).
* ``agreement``: no labels, any task; the greedy answer, scored by its token agreement with that same
  continuation (the longest common subsequence over the longer one, in the model's tokens); its
  ``metric`` is the task's own common score of the answer (a task with answers of its own), so one decode
  gives both.

Both teacher-forced modes score every candidate through one call, ``_forced``: a setting that changes
how a continuation is scored under a compressed cache (eviction while it is read) goes there.
A task judged against the full cache (``Task.judged_against_full_cache``) has its greedy answers
scored against that same continuation. The continuations are written once per record, when an
evaluator that reads them is made, and kept on the record for every later evaluator.

With a decode setting (``decode=``, ``core.decode_eviction.DecodeEviction``) every mode holds the
budgets while decoding: greedy answers are decoded under it, and likelihood teacher-forces each
reference in chunks of ``interval`` tokens with the same evictions between them
(``runtime.held_likelihood``).

An allocation whose rows fail (out of memory, a bad budget) comes back as a failed
``EvalResult`` with the error; it never gets a made-up score.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from evolalloc.core.decode_eviction import DecodeEviction, check_decode_mode
from evolalloc.engine.base import Engine, EvalResult, InstanceOutcome, check_scorer, register_engine
from evolalloc.runtime.adaptive import Adapted
from evolalloc.runtime.continuation import Continuation, continuation_of
from evolalloc.runtime.decode import DecodeSettings, Generation, eos_ids_of, generate
from evolalloc.runtime.decode_eviction import check_decode_scorer
from evolalloc.runtime.fidelity import fidelity_score, likelihood_kept
from evolalloc.runtime.held_likelihood import held_logprobs_batch
from evolalloc.runtime.instances import prefill_instances, tokenize_instance  # noqa: F401 - re-exported
from evolalloc.runtime.likelihood import TeacherForced, best_reference_score, reference_forced_batch
from evolalloc.runtime.model import LoadedModel
from evolalloc.runtime.prefill import PrefillRecord, prefill
from evolalloc.runtime.record_store import release, to_record_dtype
from evolalloc.runtime.scorers import Scorer
from fitness.metrics.agreement import greedy_prefix, token_agreement
from fitness.task import AGREEMENT_MODE, FIDELITY_MODES, check_fitness_mode

_ROW_ERRORS = (ValueError, RuntimeError, torch.OutOfMemoryError)


class LocalEvaluator:
    """Scores budgets ``[num_layers, num_kv_heads]`` on a fixed set of task instances, in-process.

    ``mode``: one of ``fitness.FITNESS_MODES`` (see the module docstring); anything else is a
    ``ValueError`` naming the valid modes. ``decode``: hold the budgets while decoding (a
    ``DecodeEviction``); a mode that cannot, or a scorer that cannot rank generated tokens, is a ``ValueError``.
    """

    def __init__(self, loaded: LoadedModel, task, instances, scorer: Scorer, *, question_after_compression=False,
                 batch_size=16,
                 progress=False, records=None, mode: str = "generate", decode: DecodeEviction | None = None):
        self.mode = check_fitness_mode(mode)
        self.decode = DecodeEviction.of(decode)
        check_decode_mode(self.decode, mode)
        if self.decode is not None:
            check_decode_scorer(scorer)
        self.loaded, self.task, self.instances, self.scorer = loaded, task, list(instances), scorer
        self.batch_size = batch_size
        # Tokenized up front: a task without continuations fails here, not as failed candidates.
        self._references = self._reference_ids() if mode == "likelihood" else None
        self.records = records if records is not None else prefill_instances(
            loaded, self.instances, [scorer], question_after_compression=question_after_compression, progress=progress
        )
        if self.records:
            check_scorer(scorer, list(self.records[0].rankings))
        self._eos = eos_ids_of(loaded.model, loaded.tokenizer)
        self._full: dict[int, PrefillRecord] = {}  # re-prefilled records, for one evaluate() call
        self._ranker = scorer.scorer if isinstance(scorer, Adapted) else scorer  # the ranking it reads
        self._continuations: list[Continuation] | None = None
        if mode in FIDELITY_MODES or mode == AGREEMENT_MODE or getattr(task, "judged_against_full_cache", False):
            self._continuations = [self._continuation(i) for i in range(len(self.instances))]
            self._full.clear()

    def close(self) -> None:
        """Drop the prefill records (the model belongs to whoever loaded it)."""
        self.records = []

    def __enter__(self) -> "LocalEvaluator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _reference_ids(self) -> list[list[torch.Tensor]]:
        """Per instance, the token ids ``[r]`` of each reference continuation."""
        out = []
        for inst in self.instances:
            ids = [torch.tensor(self.loaded.tokenizer.encode(text, add_special_tokens=False), dtype=torch.long)
                   for text in self.task.reference_continuations(inst)]
            if not ids or any(len(i) == 0 for i in ids):
                raise ValueError(f"instance {inst.uid} has an empty reference "
                                 "continuation: nothing to score in likelihood mode")
            out.append(ids)
        return out

    def evaluate(self, budgets: Sequence[np.ndarray]) -> list[EvalResult]:
        started = time.perf_counter()
        errors: dict[int, str] = {}
        if self.mode == "likelihood":
            outcomes = self._likelihood_outcomes(budgets, errors)
        elif self.mode in FIDELITY_MODES:
            outcomes = self._fidelity_outcomes(budgets, errors)
        else:
            outcomes = self._generated_outcomes(budgets, errors)
        self._full.clear()
        elapsed = time.perf_counter() - started
        results = []
        for a in range(len(budgets)):
            if a in errors:
                results.append(EvalResult(task_score=None, seconds=elapsed / len(budgets), error=errors[a]))
                continue
            done = [o for o in outcomes[a] if o is not None]
            score = float(np.mean([o.score for o in done])) if done else None
            results.append(EvalResult(task_score=score, instances=done, seconds=elapsed / len(budgets)))
        return results

    def _record(self, i: int, budgets) -> PrefillRecord:
        """Instance ``i``'s record for ``budgets``: the kept one, or — for a budget above a bounded
        record's ``b_max`` — the instance prefilled again in full (exact; said once per call)."""
        record = self.records[i]
        if record.bound is None or int(np.minimum(np.asarray(budgets), record.length).max()) <= record.bound:
            return record
        if not self._full:
            tqdm.write(f"a budget of {int(np.asarray(budgets).max())} "
                       f"is above the records' b_max = {record.bound}: "
                       "prefilling those instances again in full for it (exact, slower)", file=sys.stderr)
        return self._whole(i)

    def _whole(self, i: int) -> PrefillRecord:
        """Instance ``i``'s record holding every token: the kept one, or a bounded one's instance
        prefilled again in full (kept until the end of this ``evaluate`` call)."""
        record = self.records[i]
        if record.bound is None:
            return record
        if i not in self._full:
            full = prefill(self.loaded.model, record.prompt_ids, [self._ranker], uid=record.uid,
                           question_ids=record.question_ids)
            if record.compute_dtype is not None:
                full = to_record_dtype(full, str(record.keys[0].dtype).removeprefix("torch."))
            self._full[i] = full
        return self._full[i]

    def _continuation(self, i: int) -> Continuation:
        """The full cache's greedy continuation of instance ``i`` (its answer's limits), kept on its record."""
        inst = self.instances[i]
        settings = DecodeSettings(max_new_tokens=inst.max_new_tokens, stop=inst.stop, eos_ids=self._eos)
        return continuation_of(self.loaded.model, self.records[i], lambda: self._whole(i), self._ranker, settings,
                               self.loaded.tokenizer)

    def _judge(self, i: int, generation: Generation) -> tuple[float, float, float | None]:
        """``(metric, score, greedy_prefix)`` of instance ``i``'s greedy answer in this evaluator's mode
        (generate, graded or agreement); ``greedy_prefix`` only against the full cache's continuation (the
        agreement mode, or a task judged against it), else ``None``."""
        inst = self.instances[i]
        if self.mode == AGREEMENT_MODE:  # metric: the task's own common score of the same answer, one decode for both
            reference = self._continuations[i].token_ids.tolist()
            agreement = token_agreement(generation.token_ids, (reference,))
            judged = getattr(self.task, "judged_against_full_cache", False)
            own = (self.task.score_against(inst, generation.token_ids, reference) if judged
                   else self.task.score(inst, generation.text))[1]
            return own, agreement, greedy_prefix(generation.token_ids, (reference,))
        graded = self.mode == "graded"
        if self._continuations is not None and getattr(self.task, "judged_against_full_cache", False):
            reference = self._continuations[i].token_ids.tolist()
            metric, score = self.task.score_against(inst, generation.token_ids, reference)
            if graded:
                score = self.task.score_against(inst, generation.token_ids, reference, graded=True)[1]
            return metric, score, greedy_prefix(generation.token_ids, (reference,))
        metric, score = self.task.score(inst, generation.text)
        return metric, self.task.graded_score(inst, generation.text) if graded else score, None

    def _generated_outcomes(self, budgets, errors) -> dict[int, list[InstanceOutcome | None]]:
        outcomes: dict[int, list[InstanceOutcome | None]] = {a: [None] * len(self.instances)
                                                             for a in range(len(budgets))}
        # Instances with the same decoding limits decode together, all allocations in one batch.
        groups = defaultdict(list)
        for i, inst in enumerate(self.instances):
            groups[(inst.max_new_tokens, inst.stop)].append(i)
        for (max_new, stop), members in groups.items():
            settings = DecodeSettings(max_new_tokens=max_new, stop=stop, eos_ids=self._eos)
            keys = [(a, i) for a in range(len(budgets)) if a not in errors for i in members]
            for (a, i), gen in zip(keys, self._decode(keys, budgets, settings, errors)):
                if gen is None:
                    continue
                inst = self.instances[i]
                metric, score, prefix = self._judge(i, gen)
                outcomes[a][i] = InstanceOutcome(inst.uid, gen.text, float(metric), float(score),
                                                 generated_tokens=len(gen.token_ids), mode=self.mode,
                                                 greedy_prefix=prefix)
        return outcomes

    def _decode(self, keys, budgets, settings, errors) -> list[Generation | None]:
        """Decode rows ``keys`` (``(allocation, instance)``, allocation-major) in batches of ``batch_size``
        consecutive keys; a failing batch is retried row by row to isolate the culprit. The batches run
        instance-block-major (``by_instance_block``): the same batches, so the same answers, and where the
        instances fill whole batches each record is read once for all the allocations instead of once per
        allocation. The generations come back in ``keys``' order."""
        chunks = [keys[start : start + self.batch_size] for start in range(0, len(keys), self.batch_size)]
        out: list[list[Generation | None]] = [[] for _ in chunks]
        for c in by_instance_block(chunks):
            chunk = chunks[c]
            rows = [(self._record(i, budgets[a]), budgets[a]) for a, i in chunk]
            try:
                out[c] = generate(self.loaded.model, rows, self.scorer, settings, self.loaded.tokenizer,
                                  self.batch_size, decode=self.decode)
                continue
            except _ROW_ERRORS:
                pass
            finally:
                _release(rows)
            for (a, i), row in zip(chunk, rows):
                try:
                    out[c].extend(generate(self.loaded.model, [row], self.scorer, settings, self.loaded.tokenizer,
                                           decode=self.decode))
                except _ROW_ERRORS as exc:
                    errors.setdefault(a, f"{type(exc).__name__} on {self.instances[i].uid}: {exc}")
                    out[c].append(None)
                finally:
                    _release([row])
        return [generation for chunk in out for generation in chunk]

    def _likelihood_outcomes(self, budgets, errors) -> dict[int, list[InstanceOutcome | None]]:
        """One row per (allocation, instance, reference continuation), scored in batches."""
        keys = [(a, i, r) for a in range(len(budgets)) for i in range(len(self.instances))
                for r in range(len(self._references[i]))]
        forced = self._teacher_forced(
            keys, lambda a, i, r: (self._record(i, budgets[a]), budgets[a], self._references[i][r]), errors)

        def outcome(a: int, i: int, inst) -> InstanceOutcome:
            value = best_reference_score([forced[(a, i, r)].token_logprobs for r in range(len(self._references[i]))])
            return InstanceOutcome(inst.uid, "", value, value, mode="likelihood")

        return self._per_instance(len(budgets), errors, outcome)

    def _per_instance(self, allocations: int, errors, outcome) -> dict[int, list[InstanceOutcome | None]]:
        """``{allocation: [outcome(a, i, instance) per instance]}``; an allocation in ``errors`` keeps ``None``s."""
        return {a: [None if a in errors else outcome(a, i, inst) for i, inst in enumerate(self.instances)]
                for a in range(allocations)}

    def _fidelity_outcomes(self, budgets, errors) -> dict[int, list[InstanceOutcome | None]]:
        """One row per (allocation, instance): the full cache's continuation, teacher-forced. ``score``
        is the mode's fidelity score (``runtime/fidelity.py``), ``metric`` the likelihood kept (uncapped)."""
        keys = [(a, i) for a in range(len(budgets)) for i in range(len(self.instances))]
        forced = self._teacher_forced(
            keys, lambda a, i: (self._record(i, budgets[a]), budgets[a], self._continuations[i].token_ids), errors)

        def outcome(a: int, i: int, inst) -> InstanceOutcome:
            full = self._continuations[i].full_logprobs
            return InstanceOutcome(inst.uid, "", likelihood_kept(forced[(a, i)].token_logprobs, full),
                                   fidelity_score(self.mode, forced[(a, i)], full), mode=self.mode)

        return self._per_instance(len(budgets), errors, outcome)

    def _teacher_forced(self, keys, row_of, errors) -> dict[tuple, TeacherForced]:
        """Each key's row teacher-forced (``row_of(*key)``: record, budgets, token ids; a key's first
        item is its allocation), ``batch_size`` rows per forward; a failing batch is retried row by row to
        isolate the culprit, whose allocation gets the error."""
        forced: dict[tuple, TeacherForced] = {}
        for start in range(0, len(keys), self.batch_size):
            chunk = [k for k in keys[start : start + self.batch_size] if k[0] not in errors]
            rows = [row_of(*k) for k in chunk]
            try:
                forced.update(zip(chunk, self._forced(rows)))
                continue
            except _ROW_ERRORS:
                pass
            finally:
                _release(rows)
            for key, row in zip(chunk, rows):
                try:
                    forced[key] = self._forced([row])[0]
                except _ROW_ERRORS as exc:
                    errors.setdefault(key[0], f"{type(exc).__name__} on {self.instances[key[1]].uid}: {exc}")
                finally:
                    _release([row])
        return forced

    def _forced(self, rows) -> list[TeacherForced]:
        """Each (record, budgets, token ids) row teacher-forced under its compressed cache: the one call
        through which the likelihood and fidelity modes score every candidate. Prompt-only: the
        continuation in one chunk; with ``budget.decode``: fed in pieces that end where generation's
        evictions fall, the budgets held between them (``runtime/held_likelihood.py``)."""
        if self.decode is None:
            return reference_forced_batch(self.loaded.model, rows, self.scorer)
        return held_logprobs_batch(self.loaded.model, rows, self.scorer, self.decode)


def by_instance_block(chunks: list[list[tuple[int, int]]]) -> list[int]:
    """The order to run batches ``chunks`` of ``(allocation, instance)`` keys in: by their lowest instance,
    allocation order kept among equals. A batch's rows, and so every result, stay as batched; what changes
    is that a record is decoded for every allocation while it is mapped: at long context the held-out
    records outgrow the page cache, and allocation-major batches read each from disk once per allocation
    (results/long-context-8k: 468 GB read for 25.7 GB of records). A batch that straddles two allocations
    (instances not a multiple of the batch size) runs with the block of its lowest instance."""
    return sorted(range(len(chunks)), key=lambda c: min(i for _, i in chunks[c]))


def _release(rows) -> None:
    """Unmap spilled records once their batch is done (memory-mapped one batch at a time)."""
    for row in rows:
        release(row[0])


@register_engine("local")
class LocalEngine(Engine):
    """In-process: evaluators on the workload's shared prefill records (one per split)."""

    max_workers = 1

    def evaluator(self, split: str, scorer, mode: str = "generate") -> LocalEvaluator:
        self.check_open()
        work = self.workload
        return LocalEvaluator(work.loaded, work.task, work.instances(split), scorer,
                              batch_size=work.batch_size, records=work.records(split), mode=mode, decode=work.decode)
