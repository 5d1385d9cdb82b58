"""The measured part of ``search RECIPE --plan`` (``pipeline/plan.py``): a short calibration on this machine.

A few drawn instances of the search split (``DISTINCT`` prompts: the model loaded, their prefills,
one full batch of ``engine.batch_size`` rows made of them, evaluated with a uniform candidate at
``c`` in the search's fitness mode, and in the comparison's ``generate`` mode at every budget it
scores and, when the run curates or scores it, with the full cache; each mode's first batch timed
after a warm-up call): the record sizes and the seconds per prefill and per evaluated row.

What one prompt timed alone misses (results/long-context-4k/mkword: the comparison ran 1.8-2.2x such
an estimate): a generate batch decodes until its *longest* answer, so its rows are timed on several
prompts' answers at once; a run whose records spill beyond memory reads them memory-mapped, so the
calibration's records are spilled too and, when a split's spilled records cannot all stay in the
page cache, each of its timed batches starts with its files dropped from it (``cold_read``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from evolalloc.core.record_settings import format_size

DISTINCT = 4  # prompts a calibration batch is made of (repeated to fill engine.batch_size): its answers vary


@dataclass
class Calibration:
    """Measured on ``prompts`` drawn instances of the search split, in batches of ``batch_rows`` rows."""

    prompt_tokens: int
    load_seconds: float
    prefill_seconds: float
    search_row_seconds: float  # one candidate on one instance, in the search's fitness mode
    generate_by_budget: dict[float, float]  # the same in generate mode (the comparison's), at each budget it scores
    full_row_seconds: float  # one generate row with the full cache (curation's judgment, the ``full`` row); 0: unused
    record_bytes_whole: int
    record_bytes_bounded: int
    notes: list[str] = field(default_factory=list)
    # A generate batch decodes until its longest answer: the calibration batch's longest, in tokens, per
    # budget (``None``: the full cache), and the most a row may decode.
    answer_tokens: dict[float | None, float] = field(default_factory=dict)
    max_new_tokens: int = 0
    prompts: int = 1
    batch_rows: int = 1
    # Where the held-out records may or may not stay in the page cache (``read_mode`` "either"): the
    # comparison's rows read from disk, for the upper figure (empty otherwise).
    generate_cold_by_budget: dict[float, float] = field(default_factory=dict)
    full_row_cold_seconds: float = 0.0



def calibrate(recipe, experiment, counts, distinct: int = DISTINCT) -> Calibration:
    """Load the model, prefill ``distinct`` drawn search instances of the first task, bound their records
    at ``counts.b_max`` (spilled to disk when the run's would be) and evaluate a uniform candidate on a
    batch of ``engine.batch_size`` rows of them at ``c`` (search's mode), at each of
    ``counts.compare_budgets`` and, when the run judges or scores it, with the full cache (generate
    mode): the measured part of the plan."""
    import tempfile

    import torch

    from evolalloc.core.record_settings import parse_size
    from evolalloc.runtime.bounded import bound_record
    from evolalloc.runtime.instances import tokenize_instance
    from evolalloc.runtime.prefill import prefill
    from evolalloc.runtime.scorers import get_scorer

    notes = []
    label, _, part = experiment.parts[0]
    if experiment.resolved.multi_task:
        notes.append(f"calibrated on the first task ({label}); the others are assumed to cost the same per row")
    started = time.perf_counter()
    loaded = experiment.run.model.loaded
    load_seconds = time.perf_counter() - started
    if recipe.scorer.train is None:
        scorer, scorers = experiment.run.scorers.scorer, experiment.run.scorers.all
    else:  # its checkpoint does not exist before the run trains it: time SnapKV's ranking instead
        scorer = get_scorer("snapkv")
        scorers = [scorer]
        notes.append("the run trains its scorer first (not estimated here); calibrated with snapkv's ranking")
    section, tokenizer = part.splits.section("search"), experiment.run.model.tokenizer
    rows = max(1, recipe.engine.batch_size)  # one full batch of rows, as the evaluator forms them
    instances = part.task.instances("search", max(1, min(rows, distinct)), section.seed,
                                    part.recipe.task.context_tokens, tokenizer)
    after = part.recipe.task.question_after_compression
    prefill(loaded.model, tokenize_instance(tokenizer, instances[0], after)[0][:64], scorers)  # first-use costs
    records, seconds = [], []
    for instance in instances:
        ids, question = tokenize_instance(tokenizer, instance, after)
        started, cpu = time.perf_counter(), time.process_time()
        records.append(prefill(loaded.model, ids, scorers, uid=instance.uid, question_ids=question))
        seconds.append(time.perf_counter() - started)
        share = (time.process_time() - cpu) / (seconds[-1] * torch.get_num_threads())
        if len(records) == 1 and share < 0.6:  # other processes took the rest: every time below is inflated
            notes.append(f"this machine is busy: the prefill got {share:.0%} "
                         f"of its {torch.get_num_threads()} thread(s)' time; the times scale with that")
    whole = int(np.mean([r.nbytes() for r in records]))
    bounded = [bound_record(r, counts.b_max) if counts.b_max is not None else r for r in records]
    bounded_bytes = int(np.mean([r.nbytes() for r in bounded]))
    limit = parse_size(recipe.engine.record_memory)
    # Each split's records beyond the memory limit spill (the search split's are released before the
    # held-out split is prefilled: each has the limit to itself).
    spilled = {"search": max(0, counts.search_instances * bounded_bytes - limit) if limit is not None else 0,
               "heldout": max(0, counts.heldout_instances * bounded_bytes - limit) if limit is not None else 0}
    on_gpu = records[0].first_logits.device.type == "cuda"
    if on_gpu and any(spilled.values()):
        notes.append("records beyond engine.record_memory are pinned in host memory on a GPU, not spilled: "
                     "calibrated on records in memory")
    with tempfile.TemporaryDirectory(prefix="evolalloc-plan-") as folder:
        modes = {"search": "cached", "heldout": "cached"}
        if any(spilled.values()) and not on_gpu:  # the run reads most records from disk: so does the calibration
            # What the page cache can hold of them: the memory available now (the model already loaded),
            # less the records the run will hold in memory.
            cache = max(0, available_memory() - limit)
            modes = {split: read_mode(nbytes, cache) for split, nbytes in spilled.items()}
            said = {"search": "the search split's", "heldout": "the held-out split's"}
            notes.append("records spill to disk: calibrated on spilled records; "
                         + "; ".join(f"{said[split]} {format_size(nbytes)} spilled, {format_size(cache)} of "
                                     f"memory left to cache them: {READ_WORDS[modes[split]]}"
                                     for split, nbytes in spilled.items() if nbytes))
            written: dict = {}
            records, bounded = _spilled(records, folder, written), _spilled(bounded, folder, written)
        calibration = _time_rows(experiment, part, loaded.geometry, scorer, instances, records, bounded, rows,
                                 counts, modes, notes)
    return Calibration(prompt_tokens=records[0].length, load_seconds=load_seconds,
                       prefill_seconds=float(np.mean(seconds)), record_bytes_whole=whole,
                       record_bytes_bounded=bounded_bytes, notes=notes,
                       max_new_tokens=int(max(i.max_new_tokens or 0 for i in instances)), prompts=len(instances),
                       batch_rows=rows, **calibration)


READ_WORDS = {"cached": "timed as read from the page cache",
              "either": "timed from the page cache (and from disk for the upper figure)",
              "disk": "timed as read from disk (dropped from the page cache before each timed batch)"}


def read_mode(spilled: int, cache: int) -> str:
    """How a split's ``spilled`` bytes of records, read over and over, will be read with ``cache`` bytes of
    memory left: "cached" up to half of it, "disk" beyond all of it, "either" between. Half: the page
    cache keeps files read again and again in only part of memory (Linux's active list), and a run
    writes other files too. Measured on one 24 GB machine (results/long-context-4k/README.md, "Item 5: the
    plan beside the run it plans"): 7 GiB spilled with 21 GiB left read 3.5 GB from disk in all,
    18 GiB spilled read 22 GB — one pass over them — and ran 1.29x the cached estimate."""
    if spilled <= cache / 2:
        return "cached"
    return "disk" if spilled > cache else "either"


def available_memory() -> int:
    """Bytes of memory the system could give now (Linux ``MemAvailable``; else the free pages)."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _spilled(records: list, folder: str, written: dict) -> list:
    """``records`` written to ``folder`` and memory-mapped back, as a run keeps the records it spills;
    ``written`` (``id(record)`` -> the mapped one) is shared by the calls, so a record passed twice
    (bounded at no less than its length, the whole one) is written once."""
    from evolalloc.runtime.spill import open_spilled, write_spilled

    out = []
    for record in records:
        if id(record) not in written:
            path = write_spilled(record, os.path.join(folder, f"{len(written)}.safetensors"), "plan")
            written[id(record)] = open_spilled(path, "plan", verify=False)[0]
        out.append(written[id(record)])
    return out


def cold_read(records) -> None:
    """Drop the spilled files of ``records`` from the page cache, so the next batch reads them from disk."""
    for record in records:
        mapping = getattr(getattr(record, "keys", None), "mapping", None)
        path = getattr(mapping, "path", None)
        if path is not None and hasattr(os, "posix_fadvise"):
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _time_rows(experiment, part, geometry, scorer, instances, whole, bounded, rows: int, counts,
               modes: dict[str, str], notes: list[str]) -> dict:
    """The per-row seconds of one batch of ``rows`` rows (``instances`` repeated) in each mode and budget,
    and the batches' longest answers: the ``Calibration`` fields ``_time_rows`` measures."""
    from evolalloc.engine.local import LocalEvaluator

    answer_tokens: dict[float | None, float] = {}
    from_disk: dict[float | None, float] = {}  # per-row seconds read from disk, where the mode is "either"
    picked = [i % len(instances) for i in range(rows)]

    def row_seconds(mode: str | None, budget: float, kept=bounded, warm_up: bool = True, full: bool = False,
                    split: str = "heldout") -> float:
        """Seconds per row of one batch at ``budget``, as ``split``'s records are read; a generate batch's
        longest answer goes to ``answer_tokens[budget]``, or ``answer_tokens[None]`` for the full cache
        (``full``). Read cold, a batch of ``rows`` distinct records reads ``rows / len(instances)`` times
        the files the calibration's batch reads: that part of its time is scaled so."""
        mode = mode or experiment.resolved.fitness_mode.split("+")[0]
        evaluator = LocalEvaluator(experiment.run.model.loaded, part.task, [instances[i] for i in picked], scorer,
                                   records=[kept[i] for i in picked], mode=mode, batch_size=rows)
        uniform = [np.full((geometry.num_layers, geometry.num_kv_heads), int(budget), dtype=np.int64)]
        if warm_up:
            evaluator.evaluate(uniform)  # the first call pays for first-use allocations and kernels
        started = time.perf_counter()
        results = evaluator.evaluate(uniform)
        seconds = time.perf_counter() - started
        if modes[split] != "cached":
            cold_read(kept)
            started = time.perf_counter()
            evaluator.evaluate(uniform)
            cold = seconds + max(0.0, time.perf_counter() - started - seconds) * rows / len(instances)
            if modes[split] == "disk":
                seconds = cold
            elif split == "heldout":
                from_disk[None if full else budget] = cold / rows
        if mode == "generate" and results[0].ok:
            answer_tokens[None if full else budget] = float(max(o.generated_tokens for o in results[0].instances))
        if not results[0].ok:  # a failed batch (out of memory, at the full cache first) is not a row's time
            notes.append(f"a calibration batch at c = {budget:g} ({mode}) failed: {results[0].error}; "
                         "the time estimated from it is not a row's")
        return seconds / rows

    target = float(experiment.resolved.target)
    at_c = row_seconds("generate", target)
    # Warmed up at c: the larger budgets and the full cache are timed once each (at 8192 tokens a full
    # batch of full-cache rows takes tens of seconds).
    by_budget = {b: at_c if b == target else row_seconds("generate", b, warm_up=False)
                 for b in counts.compare_budgets}
    full = (row_seconds("generate", geometry.max_positions, kept=whole, warm_up=False, full=True)
            if counts.full_rows or counts.whole_records else 0.0)
    search = row_seconds(None, target, split="search")
    return {"search_row_seconds": search, "generate_by_budget": by_budget, "full_row_seconds": full,
            "answer_tokens": answer_tokens, "full_row_cold_seconds": from_disk.pop(None, 0.0),
            "generate_cold_by_budget": from_disk}
