"""``search RECIPE --plan``: what a run will cost, printed before anything runs (no run folder).

Counted from the recipe and the model's config (exact): the prefills (every split's instances,
a curated split's drawn candidates), the evaluations (per search: the start's candidates, then
groups x generations x population, each group at its generation cap — exactly what runs under a
fixed ``M``, the most it can run when it stops on convergence; the ``search`` expansion rule's
candidates; the held-out comparison: methods x budgets),
``b_max`` and the bytes a record keeps. Measured by a short calibration (``pipeline/plan_calibration.py``:
batches of ``engine.batch_size`` rows made of a few search prompts, in each mode and at each budget
the run evaluates, on records kept as the run will keep them): the record sizes and the seconds per
prefill and per evaluated row (a row's decode reads its whole kept cache, so at 8192 tokens a
full-cache row costs many times a row at ``c``). An evaluation's last batch is partly empty but
costs a batch (``RunPlan.padded``). The totals are estimates — the calibration's times scaled by
the counts — and the output says so on each line, and says when the machine was too busy to trust
them. The comparison also gets an upper figure: every batch's longest answer as long as the task
allows.
"""

from __future__ import annotations

from dataclasses import dataclass

from evolalloc.config.search_start import is_profile_file
from evolalloc.core.record_settings import format_size as size
from evolalloc.pipeline.plan_calibration import Calibration, calibrate
from evolalloc.search.stopping import groups_in_passes


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
    groups: list[int]  # units per group, in the order searched (every pass's)
    generations: int  # per group: EvolKV's fixed M, or the converging rule's cap
    popsizes: list[int]
    expansion_candidates: int
    compare_budgets: list[float]  # the budgets the comparison scores, ascending
    compressed_methods: int  # the methods scored at each budget but the full cache
    full_rows: int  # 1 when the full cache is a row: evaluated once, its budgets the same at every c
    b_max: int | None
    b_max_note: str = ""
    start_candidates: int = 0  # evaluated before the first group (optimizer.start)
    converging: bool = False  # each group stops when converged: the search's counts are its cap
    passes: int = 1  # optimizer.passes: the search visits every group this many times

    @property
    def compare_evaluations(self) -> int:
        """Held-out evaluations: each compressed method at each budget, the full cache once."""
        return self.compressed_methods * len(self.compare_budgets) + self.full_rows



def count_run(recipe, experiment) -> Counts:
    """The counts of ``recipe`` on ``experiment`` (``Experiment``; only the model's config is read)."""
    from evolalloc.pipeline.evaluate import FULL_CACHE
    from evolalloc.pipeline.expansion import SEARCHED_RULES
    from evolalloc.pipeline.record_bound import run_record_bound

    resolved = experiment.resolved
    config = experiment.search_config
    groups = [len(g) for g in config.schedule()]  # every pass's
    popsizes = [config.popsize_for(n) for n in groups]
    per_search = config.planned_evaluations()
    searches = len(resolved.curve_anchors) if resolved.curve_grid else 1
    expansions = len(resolved.expansions) if not resolved.curve_grid else 0
    # rule search scores each rule, and the search's start methods too, at every expansion budget
    expansion_candidates = (expansions * (len(SEARCHED_RULES) + len(config.start))
                            if resolved.expansion_rule == "search" else 0)
    prefills, whole, search_n, heldout_n = {}, 0, 0, 0
    search_lengths = []  # (context_tokens, search prompts) per task, for LU-KV's count
    for label, _, part in experiment.parts:
        search_lengths.append((part.splits.task_section.context_tokens, part.splits.section("search").n))
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
        b_max = run_record_bound(resolved.budgets, config, baselines=(), methods=None)
        note = " (the search's bound; a baseline may raise it)"
    profiled = [*recipe.baselines, *(name for name in config.start if not is_profile_file(name))]
    profiled_forwards = _profiled_forwards(profiled, search_lengths, b_max)
    if profiled_forwards:
        prefills["LU-KV's utility curves (each search prompt prefilled again whole: its record is bounded)"] = (
            profiled_forwards)
    return Counts(search_instances=search_n, heldout_instances=heldout_n, prefills=prefills, whole_records=whole,
                  searches=searches, evaluations_per_search=per_search, groups=groups,
                  generations=config.stop_rule.cap, popsizes=popsizes, start_candidates=len(config.start),
                  converging=not config.stop_rule.fixed, passes=config.passes,
                  expansion_candidates=expansion_candidates,
                  compare_budgets=sorted(float(b) for b in resolved.budgets), compressed_methods=methods - full_rows,
                  full_rows=full_rows, b_max=b_max, b_max_note=note)


def _profiled_forwards(methods, search_lengths, b_max: int | None) -> int:
    """Prompt-length forwards a profiled method (``lukv``, a baseline or a start) adds: none over a whole
    record (the answer is fed over it, ``pipeline/lukv.py``), one per search prompt of a task whose records
    are bounded below the prompt (a bounded record lacks keys, and its ranking holds slots, not positions).
    ``search_lengths``: ``(context_tokens, search prompts)`` per task."""
    from evolalloc.core.baselines import make_baseline

    if b_max is None or not any(make_baseline(name).profiled for name in methods):
        return 0
    # A task at its own default length (context_tokens null): its prompts' length is not known before they
    # are drawn, so it is counted as bounded (the upper figure).
    return sum(n for tokens, n in search_lengths if tokens is None or b_max < tokens)



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
        """Rows ``n`` rows of one evaluation cost: its rows (every allocation's instances, in order) are cut
        into batches of ``batch_rows``, the last one partly empty, and a batch's decode costs about the same
        however many of its rows are filled."""
        rows = max(1, self.calibration.batch_rows)
        return -(-n // rows) * rows

    def comparison(self, by_budget: dict[float, float], full: float) -> float:
        """The held-out comparison's seconds from per-row times: each compressed method one evaluation of its
        budgets on every held-out instance, the full cache one of its own."""
        c = self.counts
        n, budgets = c.heldout_instances, len(by_budget)
        spread = self.padded(budgets * n) / (budgets * n) if budgets and n else 1.0
        return c.compressed_methods * n * spread * sum(by_budget.values()) + c.full_rows * self.padded(n) * full

    def seconds(self) -> dict[str, float]:
        """The time estimate per phase: measured seconds times the counts (a search evaluates each
        generation's candidates in one call; the comparison each method's budgets in one)."""
        c, k = self.counts, self.calibration
        search = c.searches * (sum(c.generations * self.padded(p * c.search_instances) for p in c.popsizes)
                               + (self.padded(c.start_candidates * c.search_instances) if c.start_candidates else 0))
        return {
            "load the model": k.load_seconds,
            "prefill": sum(c.prefills.values()) * k.prefill_seconds,
            "curation (full-cache judgment of the drawn)": self.padded(c.whole_records) * k.full_row_seconds,
            "search" + (" (every group to its cap: an upper figure)" if c.converging else ""):
                search * k.search_row_seconds,
            "expansion candidates (rule: search)": (self.padded(c.expansion_candidates * c.search_instances)
                                                    * k.search_row_seconds),
            "held-out comparison": self.comparison(k.generate_by_budget, k.full_row_seconds),
        }

    def comparison_upper(self) -> float | None:
        """The held-out comparison if every batch's longest answer ran to ``max_new_tokens`` (each
        calibration row's time scaled by ``max_new_tokens`` over its batch's longest answer, its fixed
        costs scaled too) and, where its records may not stay in the page cache, every row read them
        from disk: an upper figure; ``None`` when the calibration measured neither."""
        k = self.calibration
        lengths = bool(k.max_new_tokens and k.answer_tokens)
        if not lengths and not k.generate_cold_by_budget:
            return None
        by_budget = {**k.generate_by_budget, **k.generate_cold_by_budget}
        full = k.full_row_cold_seconds or k.full_row_seconds

        def longest(seconds: float, key) -> float:
            if not lengths:
                return seconds
            return seconds * k.max_new_tokens / max(1.0, k.answer_tokens.get(key, k.max_new_tokens))

        return self.comparison({b: longest(s, b) for b, s in by_budget.items()}, longest(full, None))

    def memory(self) -> list[tuple[str, float]]:
        c, k = self.counts, self.calibration
        return [("search split records (bounded)", c.search_instances * k.record_bytes_bounded),
                ("held-out split records (bounded at b_max; compare may bound them tighter)",
                 c.heldout_instances * k.record_bytes_bounded),
                ("drawn candidates' whole records, during curation", c.whole_records * k.record_bytes_whole)]

    def lines(self) -> list[str]:
        c, k, g = self.counts, self.calibration, self.geometry
        group_text = " + ".join(f"{c.generations} x {p}" for p in c.popsizes)
        if c.start_candidates:
            group_text = f"start {c.start_candidates} + {group_text}"
        cap = (": at most — each group stops when it has converged, the counts are its cap of "
               f"{c.generations} generations" if c.converging else "")
        out = [
            f"plan for {self.name}: {self.model} ({g.num_layers} layers "
            f"x {g.num_kv_heads} KV heads, head size {g.head_dim}, "
            f"{self.dtype}), prompts of {self.context} tokens. Nothing has been written.",
            "COUNTED (exact, from the recipe and the model's config):",
            f"  prefills: {sum(c.prefills.values())} = " + " + ".join(f"{n} {what}" for what, n in c.prefills.items()),
            f"  evaluations: {c.searches} search(es) x {c.evaluations_per_search} candidates ({len(c.groups)} groups"
            f"{groups_in_passes(len(c.groups), c.passes)}: "
            f"generations x population = {group_text}{cap}), each on {c.search_instances} search instances",
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
            why = [f"every batch's longest answer runs to {k.max_new_tokens} tokens (the calibration batches' "
                   f"longest were {lengths}; a batch decodes until its longest answer)"
                   ] if k.answer_tokens and min(k.answer_tokens.values()) < k.max_new_tokens else []
            why += ["its records are read from disk each time (they may not stay in the page cache)"
                    ] if k.generate_cold_by_budget else []
            out.append(f"    (up to {duration(upper)} if " + " and ".join(why) + ")")
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
