"""``search RECIPE --plan``: what a run will cost, printed before anything runs (no run folder).

Counted from the recipe and the model's config (exact): the prefills (every split's instances,
a curated split's drawn candidates), the evaluations (per search: groups x generations x
population; the ``search`` expansion rule's candidates; the held-out comparison: methods x budgets),
``b_max`` and the bytes a record keeps. Measured by a short calibration on a few drawn instances of
the search split (``DISTINCT`` prompts: the model loaded, their prefills, one full batch of
``engine.batch_size`` rows made of them, evaluated with a uniform candidate at ``c`` in the search's
fitness mode, and in the comparison's ``generate`` mode at every budget it scores and, when the run
curates or scores it, with the full cache — curation's judgment and the ``full`` row; each mode's
first batch timed after a warm-up call): the record sizes and the seconds per prefill and per
evaluated row (a row's decode reads its whole kept cache, so at 8192 tokens a full-cache row costs
many times a row at ``c``).

What one prompt timed alone misses (results/long-context-4k/mkword: the comparison ran 1.8-2.2x such
an estimate): a generate batch decodes until its *longest* answer, so its rows are timed on several
prompts' answers at once; a run whose records spill beyond memory reads them from disk each time
(memory-mapped), so the calibration's records are spilled too and, when the run's spilled records
cannot all stay in the page cache, each timed batch starts with its files dropped from it (a cold
read: ``cold_read``); an evaluation's last batch is partly empty but costs a batch (``padded``).
The totals are estimates — the calibration's times scaled by the counts — and the output says so on
each line, and says when the machine was too busy to trust them. The comparison also gets an upper
figure: every batch's longest answer as long as the task allows.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

GIB, MIB = 1024**3, 1024**2
DISTINCT = 4  # prompts a calibration batch is made of (repeated to fill engine.batch_size): its answers vary


def size(nbytes: float) -> str:
    return f"{nbytes / GIB:.2f} GiB" if nbytes >= GIB else f"{nbytes / MIB:.1f} MiB"


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


@dataclass
class Counts:
    """What the recipe implies, exactly (no model needed)."""

    search_instances: int  # scored per candidate (all tasks)
    heldout_instances: int
    prefills: dict[str, int]  # what is prefilled -> how many prompts
    whole_records: int  # drawn candidates judged by curation: kept whole until the split is chosen
    searches: int
    evaluations_per_search: int
    groups: list[int]  # units per group
    generations: int
    popsizes: list[int]
    expansion_candidates: int
    compare_budgets: list[float]  # the budgets the comparison scores, ascending
    compressed_methods: int  # the methods scored at each budget but the full cache
    full_rows: int  # 1 when the full cache is a row: evaluated once, its budgets the same at every c
    b_max: int | None
    b_max_note: str = ""

    @property
    def compare_evaluations(self) -> int:
        """Held-out evaluations: each compressed method at each budget, the full cache once."""
        return self.compressed_methods * len(self.compare_budgets) + self.full_rows


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
    cold: bool = False  # the comparison's timed batches read their records from disk (page cache dropped first)


def count_run(recipe, experiment) -> Counts:
    """The counts of ``recipe`` on ``experiment`` (``Experiment``; only the model's config is read)."""
    from evolalloc.pipeline.evaluate import FULL_CACHE
    from evolalloc.pipeline.expansion import SEARCHED_RULES
    from evolalloc.pipeline.record_bound import record_bound
    from evolalloc.pipeline.search_settings import search_config

    resolved = experiment.resolved
    config = search_config(experiment)
    groups = [len(g) for g in config.build_space().groups()]
    popsizes = [config.popsize_for(n) for n in groups]
    per_search = sum(config.generations * p for p in popsizes)
    searches = len(resolved.curve_anchors) if resolved.curve_grid else 1
    expansions = len(resolved.expansions) if not resolved.curve_grid else 0
    expansion_candidates = expansions * len(SEARCHED_RULES) if resolved.expansion_rule == "search" else 0
    prefills, whole, search_n, heldout_n = {}, 0, 0, 0
    for label, _, part in experiment.parts:
        for split in ("search", "heldout"):
            section = part.splits.section(split)
            curated = section.curate.active
            drawn = (section.curate.draw or 2 * section.n) if curated else section.n
            prefills[f"{label} {split}" + (f" (curated: {drawn} drawn for {section.n})" if curated else "")] = drawn
            whole += drawn if curated else 0
            search_n += section.n if split == "search" else 0
            heldout_n += section.n if split == "heldout" else 0
    methods = 1 + len(recipe.baselines)
    full_rows = int(FULL_CACHE in recipe.baselines)
    note = ""
    if recipe.scorer.train is None:
        b_max = experiment.run.records.policy.bound
    else:  # the baselines' budgets need the trained scorer: only the search's own bound is known now
        upper = config.build_space().ratio_bounds[1]
        b_max = record_bound([float(c) for c in resolved.budgets], upper, [])
        note = " (the search's bound; a baseline may raise it)"
    profiled_forwards = _profiled_forwards(recipe, search_n, b_max)
    if profiled_forwards:
        prefills["LU-KV's utility curves (a forward over each search prompt and its answer"
                 + (", and its ranking again: bounded records" if profiled_forwards > search_n else "") + ")"] = (
            profiled_forwards)
    return Counts(search_instances=search_n, heldout_instances=heldout_n, prefills=prefills, whole_records=whole,
                  searches=searches, evaluations_per_search=per_search, groups=groups, generations=config.generations,
                  popsizes=popsizes, expansion_candidates=expansion_candidates,
                  compare_budgets=sorted(float(b) for b in resolved.budgets), compressed_methods=methods - full_rows,
                  full_rows=full_rows, b_max=b_max, b_max_note=note)


def _profiled_forwards(recipe, search_n: int, b_max: int | None) -> int:
    """Prompt-length forwards a profiled baseline (``lukv``) adds: one over each search prompt with its
    answer (``pipeline/lukv.py``), and a second for the ranking when the records are bounded below the
    prompt (a bounded record's ranking holds slots, not positions); 0 without such a baseline."""
    from evolalloc.core.baselines import make_baseline

    if not any(make_baseline(name).profiled for name in recipe.baselines):
        return 0
    # A task at its own default length (context_tokens null): its prompts' length is not known before they
    # are drawn, so count the second forward (the upper figure).
    lengths = [e.context_tokens for e in recipe.task_entries]
    bounded = b_max is not None and (None in lengths or b_max < min(lengths))
    return search_n * (2 if bounded else 1)


def calibrate(recipe, experiment, counts: Counts, distinct: int = DISTINCT) -> Calibration:
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
    with tempfile.TemporaryDirectory(prefix="evolalloc-plan-") as folder:
        cold = {"search": False, "heldout": False}
        if any(spilled.values()):  # the run reads most records from disk: so does the calibration
            # What the page cache can hold of them: the memory available now, less what the run holds
            # itself (its weights and the records it keeps in memory).
            weights = sum(t.numel() * t.element_size() for t in loaded.model.state_dict().values())
            cache = max(0, available_memory() - weights - limit)
            cold = {mode: nbytes > cache for mode, nbytes in spilled.items()}
            said = {"search": "the search split's", "heldout": "the held-out split's"}
            notes.append("records spill to disk: calibrated on spilled records; "
                         + "; ".join(f"{said[mode]} {size(nbytes)} spilled "
                                     + ("exceed" if cold[mode] else "fit in")
                                     + f" the {size(cache)} of memory left to cache them: read "
                                     + ("cold (dropped from the page cache before each timed batch)" if cold[mode]
                                        else "from the page cache")
                                     for mode, nbytes in spilled.items() if nbytes))
            records, bounded = _spilled(records, folder), _spilled(bounded, folder)
        calibration = _time_rows(experiment, part, loaded.geometry, scorer, instances, records, bounded, rows,
                                 counts, cold, notes)
    return Calibration(prompt_tokens=records[0].length, load_seconds=load_seconds,
                       prefill_seconds=float(np.mean(seconds)), record_bytes_whole=whole,
                       record_bytes_bounded=bounded_bytes, notes=notes,
                       max_new_tokens=int(max(i.max_new_tokens or 0 for i in instances)), prompts=len(instances),
                       batch_rows=rows, cold=cold["heldout"], **calibration)


def available_memory() -> int:
    """Bytes of memory the system could give now (Linux ``MemAvailable``; else the free pages)."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _spilled(records: list, folder: str) -> list:
    """``records`` written to ``folder`` and memory-mapped back, as a run keeps the records it spills."""
    from evolalloc.runtime.spill import open_spilled, write_spilled

    out, written = [], {}
    for record in records:
        if id(record) not in written:  # a record bounded at no less than its length is the whole one
            path = write_spilled(record, os.path.join(folder, f"{len(os.listdir(folder))}.safetensors"), "plan")
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


def _time_rows(experiment, part, geometry, scorer, instances, whole, bounded, rows: int, counts: Counts,
               cold: dict[str, bool], notes: list[str]) -> dict:
    """The per-row seconds of one batch of ``rows`` rows (``instances`` repeated) in each mode and budget,
    and the batches' longest answers: the ``Calibration`` fields ``_time_rows`` measures."""
    from evolalloc.engine.local import LocalEvaluator

    answer_tokens: dict[float | None, float] = {}
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
        if cold[split]:
            cold_read(kept)
            started = time.perf_counter()
            evaluator.evaluate(uniform)
            seconds += max(0.0, time.perf_counter() - started - seconds) * rows / len(instances)
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
    return {"search_row_seconds": row_seconds(None, target, split="search"), "generate_by_budget": by_budget,
            "full_row_seconds": full, "answer_tokens": answer_tokens}


@dataclass
class RunPlan:
    """The counts (exact), the calibration (measured) and the totals (estimates) of one run."""

    name: str
    model: str
    dtype: str
    geometry: object
    context: str
    record_dtype: str
    record_memory: int | None
    counts: Counts
    calibration: Calibration

    def padded(self, n: int) -> int:
        """Rows ``n`` instances cost: an evaluation's last batch is partly empty, and a batch's decode
        costs about the same however many of its rows are filled."""
        rows = max(1, self.calibration.batch_rows)
        return -(-n // rows) * rows

    def seconds(self) -> dict[str, float]:
        """The time estimate per phase: measured seconds times the counts."""
        c, k = self.counts, self.calibration
        return {
            "load the model": k.load_seconds,
            "prefill": sum(c.prefills.values()) * k.prefill_seconds,
            "curation (full-cache judgment of the drawn)": self.padded(c.whole_records) * k.full_row_seconds,
            "search": c.searches * c.evaluations_per_search * self.padded(c.search_instances) * k.search_row_seconds,
            "expansion candidates (rule: search)": (c.expansion_candidates * self.padded(c.search_instances)
                                                    * k.search_row_seconds),
            "held-out comparison": self.padded(c.heldout_instances) * (
                c.compressed_methods * sum(k.generate_by_budget.values()) + c.full_rows * k.full_row_seconds),
        }

    def comparison_upper(self) -> float | None:
        """The held-out comparison if every batch's longest answer ran to ``max_new_tokens`` (each
        calibration row's time scaled by ``max_new_tokens`` over its batch's longest answer: an upper
        figure, its fixed costs scaled too); ``None`` when the calibration has no answer lengths."""
        c, k = self.counts, self.calibration
        if not k.max_new_tokens or not k.answer_tokens:
            return None

        def longest(seconds: float, key) -> float:
            return seconds * k.max_new_tokens / max(1.0, k.answer_tokens.get(key, k.max_new_tokens))

        per_budget = sum(longest(s, b) for b, s in k.generate_by_budget.items())
        return self.padded(c.heldout_instances) * (c.compressed_methods * per_budget
                                                   + c.full_rows * longest(k.full_row_seconds, None))

    def memory(self) -> list[tuple[str, float]]:
        c, k = self.counts, self.calibration
        return [("search split records (bounded)", c.search_instances * k.record_bytes_bounded),
                ("held-out split records (bounded at b_max; compare may bound them tighter)",
                 c.heldout_instances * k.record_bytes_bounded),
                ("drawn candidates' whole records, during curation", c.whole_records * k.record_bytes_whole)]

    def lines(self) -> list[str]:
        c, k, g = self.counts, self.calibration, self.geometry
        group_text = " + ".join(f"{c.generations} x {p}" for p in c.popsizes)
        out = [
            f"plan for {self.name}: {self.model} ({g.num_layers} layers "
            f"x {g.num_kv_heads} KV heads, head size {g.head_dim}, "
            f"{self.dtype}), prompts of {self.context} tokens. Nothing has been written.",
            "COUNTED (exact, from the recipe and the model's config):",
            f"  prefills: {sum(c.prefills.values())} = " + " + ".join(f"{n} {what}" for what, n in c.prefills.items()),
            f"  evaluations: {c.searches} search(es) x {c.evaluations_per_search} candidates ({len(c.groups)} groups: "
            f"generations x population = {group_text}), each on {c.search_instances} search instances",
        ]
        if c.expansion_candidates:
            out.append(f"               + {c.expansion_candidates} expansion "
                       "candidates (rule search) on the search instances")
        out += [
            f"               + {c.compare_evaluations} held-out evaluations "
            f"(methods x budgets"
            + (", the full cache's once: the same at every budget" if c.full_rows else "")
            + f") on {c.heldout_instances} instances",
            f"  b_max: {c.b_max if c.b_max is not None else 'none (whole records)'}{c.b_max_note}; "
            f"records in {self.record_dtype}, up to "
            f"{size(self.record_memory) if self.record_memory is not None else 'no limit'} "
            f"held in memory (engine.record_memory), the rest spilled to disk",
            f"MEASURED ({k.prompts} drawn search instance{'s' if k.prompts > 1 else ''} of {k.prompt_tokens} "
            f"tokens, in batches of {k.batch_rows} rows): model load {k.load_seconds:.1f} s, prefill "
            f"{k.prefill_seconds:.2f} s each, one candidate on one instance "
            f"{k.search_row_seconds:.3f} s (search's fitness mode), in generate mode "
            + ", ".join(f"{s:.3f} s at {b:g}" for b, s in k.generate_by_budget.items())
            + (f" and {k.full_row_seconds:.3f} s with the full cache" if k.full_row_seconds else "")
            + f", per row of a full batch; record {size(k.record_bytes_bounded)} bounded, "
            f"{size(k.record_bytes_whole)} whole",
            *(f"  note: {note}" for note in k.notes),
            "ESTIMATED memory of the records (measured record x count):",
        ]
        spilled = 0.0
        for what, nbytes in self.memory():
            if not nbytes:
                continue
            beyond = max(0.0, nbytes - self.record_memory) if self.record_memory is not None else 0.0
            spilled += beyond
            out.append(f"  {what}: {size(nbytes)}" + (f" ({size(beyond)} of it spilled to disk)" if beyond else ""))
        out.append(f"  disk if records spill: up to {size(spilled)}" if spilled
                   else "  disk: none (every record fits in memory)")
        out.append("ESTIMATED time (measured seconds x counts, on this machine as busy as it was):")
        phases, upper = self.seconds(), self.comparison_upper()
        out += [f"  {what}: {duration(s)}" for what, s in phases.items() if s > 0]
        compare = phases["held-out comparison"]
        longer = upper is not None and upper > 1.05 * compare
        if longer:
            lengths = ", ".join(f"{t:.0f}" for t in k.answer_tokens.values())
            out.append(f"    (up to {duration(upper)} if every batch's longest answer runs to {k.max_new_tokens} "
                       f"tokens: the calibration batches' longest were {lengths}, and a batch decodes until its "
                       "longest answer)")
        total = sum(phases.values())
        out.append(f"  total: about {duration(total)}"
                   + (f" (up to {duration(total - compare + upper)})" if longer else "")
                   + (" + the scorer's training (not estimated)" if any("trains its scorer" in n for n in k.notes)
                      else ""))
        return out


def plan_run(recipe) -> RunPlan:
    """Count, calibrate and estimate the run ``recipe`` describes; writes nothing."""
    from evolalloc.core.record_settings import parse_size
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.pipeline.start import blamed_on, check_context_fits

    check_context_fits(recipe)
    with Experiment(recipe, progress=False) as experiment, blamed_on(recipe):
        counts = count_run(recipe, experiment)
        calibration = calibrate(recipe, experiment, counts)
        contexts = sorted({str(e.context_tokens) for e in recipe.task_entries})
        return RunPlan(name=recipe.name, model=recipe.model.spec, dtype=recipe.model.dtype,
                       geometry=experiment.run.model.geometry,
                       context="/".join(contexts), record_dtype=recipe.engine.record_dtype,
                       record_memory=parse_size(recipe.engine.record_memory), counts=counts, calibration=calibration)
