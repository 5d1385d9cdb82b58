"""``evolalloc bench scale``: how memory and time grow with the context and the instance count.

Two sweeps, each cell in a fresh process (``bench/scale_cell.py``) so that its peak resident
memory is its own: contexts at a fixed number of instances, and instance counts at a fixed
context. A row can also be *extrapolated* — from the measured cell at the largest context: its
peak plus the measured bytes per record for each extra instance, its evaluation time scaled by
the instance count (the evaluation runs over every instance) — and is then labelled so.

Records are kept as a run keeps them (bounded at the cell's ``b_max``, ``bench/scale_cell.py``),
so the bytes per record an extrapolation adds are bounded records' measured sizes; ``fits``
says, for each row, whether its peak is within a memory size (16 GiB by default).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, replace
from typing import Callable, Sequence

from evolalloc.bench.scale_cell import CellResult, CellSettings
from evolalloc.core.budget_list import parse_budgets

MiB = 2**20


def parse_sizes(text: str, option: str) -> tuple[int, ...]:
    """``"1000,2000"`` -> ``(1000, 2000)``; anything but positive whole numbers is a ``UserError``
    naming ``option``. An empty text is an empty sweep."""
    return tuple(parse_budgets(text, option, whole=True, allow_empty=True))


def run_cell(settings: CellSettings) -> CellResult:
    """Measure one cell in a child process; a child that fails comes back as a row with its error."""
    env = {**os.environ, "OMP_NUM_THREADS": str(settings.threads), "TRANSFORMERS_VERBOSITY": "error"}
    proc = subprocess.run([sys.executable, "-m", "evolalloc.bench.scale_cell", json.dumps(asdict(settings))],
                          capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return CellResult(settings.context_tokens, settings.instances, error=tail)
    return CellResult(**json.loads(lines[-1]))


def extrapolate(measured: CellResult, instances: int) -> CellResult:
    """An estimate for ``instances`` prompts from a measured cell of the same context: every
    record adds the measured bytes per record to the peak; evaluating a candidate costs the
    measured time per instance times ``instances``; the prefill time per instance is unchanged."""
    if measured.error or not measured.instances:
        raise ValueError("cannot extrapolate from a failed cell")
    extra = instances - measured.instances
    per_record = measured.record_bytes / measured.instances
    scale = instances / measured.instances
    return replace(
        measured,
        instances=instances,
        peak_rss=int(measured.peak_rss + extra * per_record),
        record_bytes=int(measured.record_bytes + extra * per_record),
        whole_bytes=int(measured.whole_bytes * scale),
        eval_seconds={b: s * scale for b, s in measured.eval_seconds.items()},
        generated_tokens={b: t * scale for b, t in measured.generated_tokens.items()},
        extrapolated_from=measured.instances,
    )


def sweep(base: CellSettings, *, contexts: Sequence[int], counts: Sequence[int], count_context: int,
          extrapolate_to: Sequence[int], log: Callable[[str], None] = lambda m: None) -> list[CellResult]:
    """The measured contexts (at ``base.instances``), the measured counts (at ``count_context``),
    then the extrapolated counts from the measured cell of the largest context."""
    cells = []
    plan = [replace(base, context_tokens=c)
            for c in contexts] + [replace(base, context_tokens=count_context, instances=n) for n in counts]
    for settings in plan:
        log(f"measuring {settings.instances} x {settings.context_tokens} tokens ...")
        cells.append(run_cell(settings))
    by_context = [c for c in cells[: len(contexts)] if not c.error]
    if extrapolate_to and by_context:
        source = max(by_context, key=lambda c: c.context_tokens)
        cells += [extrapolate(source, n) for n in extrapolate_to]
    return cells


def table(cells: Sequence[CellResult], budgets: Sequence[int]) -> list[str]:
    """The report: one row per cell, the extrapolated ones labelled, the failed ones with their error.
    Each budget's column: seconds per candidate and, in brackets, the tokens it generated."""
    head = (f"{'context':>8} {'tokens':>7} {'inst':>5} {'peak RSS MiB':>12} "
            f"{'b_max':>6} {'records MiB':>11} {'(whole MiB)':>11} "
            f"{'prefill s/inst':>14}")
    head += "".join(f" {'eval @' + str(b) + ': s/cand (tok)':>24}" for b in budgets) + "  how"
    lines = [head]
    for c in cells:
        row = f"{c.context_tokens:>8} "
        if c.error:
            lines.append(row + f"{'':>7} {c.instances:>5}  failed: {c.error}")
            continue
        bound = "whole" if c.bound is None else str(c.bound)
        row += (f"{c.prompt_tokens:>7.0f} {c.instances:>5} "
                f"{c.peak_rss / MiB:>12.0f} {bound:>6} {c.record_bytes / MiB:>11.1f} "
                f"{'(' + format(c.whole_bytes / MiB, '.1f') + ')':>11} {c.prefill_seconds:>14.2f}")
        row += "".join(f" {c.eval_seconds.get(str(b), float('nan')):>16.3f} ({c.generated_tokens.get(str(b), 0):>4.0f})"
                       for b in budgets)
        row += f"  extrapolated from {c.extrapolated_from} measured" if c.extrapolated_from else "  measured"
        lines.append(row)
    return lines


def budget_vs_context(cells: Sequence[CellResult], budgets: Sequence[int]) -> list[str]:
    """Whether a candidate's evaluation cost follows the budget or the context, per generated
    token (greedy answers stop at different lengths, so seconds per candidate alone mislead):
    for each budget, the slowest against the fastest measured context at the same instance
    count; at each context, the largest budget against the smallest."""
    measured = [c for c in cells if not c.error and not c.extrapolated_from]
    if not measured:
        return []
    count = measured[0].instances
    same = sorted((c for c in measured if c.instances == count), key=lambda c: c.context_tokens)

    def per_token(cell: CellResult, budget: int) -> float:
        tokens = cell.generated_tokens.get(str(budget), 0.0)
        return cell.eval_seconds[str(budget)] / tokens if tokens else float("nan")

    lines = ["evaluation seconds per generated token (decode length varies with the answers):"]
    if len(same) > 1:
        lo, hi = same[0], same[-1]
        for b in budgets:
            a, z = per_token(lo, b), per_token(hi, b)
            lines.append(f"  budget {b}: {a:.4f} at {lo.context_tokens} "
                         f"tokens -> {z:.4f} at {hi.context_tokens} tokens "
                         f"({z / a:.2f}x for {hi.context_tokens / lo.context_tokens:.1f}x the context)")
    if len(budgets) > 1:
        for c in same:
            a, z = per_token(c, budgets[0]), per_token(c, budgets[-1])
            lines.append(f"  {c.context_tokens} tokens: {a:.4f} at budget {budgets[0]} "
                         f"-> {z:.4f} at budget {budgets[-1]} ({z / a:.2f}x)")
    return lines


def fits(cells: Sequence[CellResult], limit: int) -> list[str]:
    """One line per row: its peak resident memory against ``limit`` bytes, saying whether the row
    was measured or extrapolated (and from what), and its records' size per instance."""
    lines = []
    for c in cells:
        if c.error:
            continue
        how = (f"extrapolated from {c.extrapolated_from} measured: their "
               f"peak + {c.instances - c.extrapolated_from} more records"
               if c.extrapolated_from else "measured")
        kept = "whole" if c.bound is None else f"bounded at b_max = {c.bound}"
        verdict = "fits in" if c.peak_rss <= limit else "does NOT fit in"
        lines.append(f"{c.instances} instances of {c.context_tokens} tokens: "
                     f"peak {c.peak_rss / 2**30:.2f} GiB ({how}; records "
                     f"{c.record_bytes / c.instances / MiB:.1f} MiB each, {kept}) — {verdict} {limit / 2**30:g} GiB")
    return lines
