"""Split curation: keep only task instances that carry signal, and record how many were kept.

A split whose recipe section says ``curate: {full_cache_solves: true, ...}`` draws ``draw``
candidate instances *of that split* (the task's own split mechanism, ``fitness.splits``, decides
which split an instance belongs to, so a held-out instance can never be drawn for the search),
evaluates them with the full cache (every budget at least the prompt length; greedy answer, the
task's real metric) and keeps, in draw order, those it solves — and, when
``reference_unsolved: uniform`` (EvolKV's NIAH protocol; search split only), of those only the
ones uniform at the target ``c`` does *not* already solve. The first ``n`` kept are the split;
fewer are used (and reported) when the draws run out.

The candidates are judged a slice at a time, in draw order, and judging stops once ``n`` are
kept: the kept ones are the first ``n`` of the whole draw either way, so the rest would only cost
prefills (the main job's 32nd kept prompt is its 46th of 56). ``drawn`` in ``curation.json``
counts the candidates judged; ``draw`` (in its ``criteria``) is the most it may draw. On the
in-process engine a slice is ``engine.batch_size`` candidates, so each is decoded in the very
batches the whole draw would be (with one budget judged; ``reference_unsolved`` judges two, whose
rows the engine batches together); a Ray engine starts its workers per split, so it judges the
whole draw in one go.

"Solves" means the instance's common score is 1 (within 1e-9): exact for the 0/1 metrics of the
needle tasks; strict for graded metrics (F1, ROUGE), where it keeps only perfect answers.

The held-out split is never filtered by a compressed method's score (the recipe refuses
``reference_unsolved`` there); its only filter is "the full cache solves it", which removes the
same instances for every method.

The outcome of each curation is written to ``curation.json`` in the run folder; a later process
on the same run (``resume``, ``compare``) reads the kept uids back instead of evaluating again,
so every command of a run sees the very same instances.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from evolalloc.config.run_folder import CURATION_FILE  # noqa: F401 - the run folder's name for it
from evolalloc.core.errors import UserError
from evolalloc.core.fileio import write_atomic

DRAWN = ":drawn"  # the pseudo-split of a curated split's candidates: "search:drawn"
SOLVED = 1.0 - 1e-9
# A budget no prompt reaches: budgets are clipped to each record's length, so this is the full cache.
FULL_BUDGET = 1 << 30


@dataclass
class Curation:
    """What curating one task's split did. ``kept_uids`` are the instances used, in order."""

    task: str
    split: str
    wanted: int
    drawn: int
    full_cache_solved: int
    kept: int
    kept_uids: list[str] = field(default_factory=list)
    reference: str | None = None
    reference_budget: float | None = None
    reference_solved: int | None = None  # of the instances the full cache solved
    draw: int | None = None  # the most it could draw; ``drawn`` is fewer when judging stopped at ``wanted`` kept

    def line(self) -> str:
        """One line for the console and the report."""
        text = f"curation {self.task}/{self.split}: drew {self.drawn}"
        if self.draw is not None and self.draw > self.drawn:
            text += f" of up to {self.draw} (stopped at {self.wanted} kept)"
        text += f", the full cache solved {self.full_cache_solved}"
        if self.reference is not None:
            text += f", {self.reference} at c = {self.reference_budget:g} also solved {self.reference_solved} of those"
        text += f"; kept {self.kept} (wanted {self.wanted})"
        if self.kept < self.wanted:
            text += f" — FEWER than wanted: raise {self.split}.curate.draw for more"
        return text


def select(
    uids: Sequence[str], full: Sequence[float], reference: Sequence[float] | None, wanted: int,
) -> tuple[list[int], int, int | None]:
    """Indices (in draw order) of at most ``wanted`` instances that the full cache solves and,
    if ``reference`` scores are given, the reference does not; plus the two solved counts."""
    solved = [i for i, score in enumerate(full) if score >= SOLVED]
    if reference is None:
        return solved[:wanted], len(solved), None
    also = [i for i in solved if reference[i] >= SOLVED]
    kept = [i for i in solved if reference[i] < SOLVED]
    return kept[:wanted], len(solved), len(also)


def curate(section, split: str, drawn: list, label: str, *, geometry, target: float, engine,
           baseline: Callable[[str, float], object], evaluator: Callable[[str], object]) -> Curation:
    """Evaluate ``drawn`` (instances of ``split``) and decide which are kept (see the module docstring).

    ``section``: the split's section (its ``n`` and ``curate`` rules); ``label``: the task, as the
    curation record and its errors name it; ``geometry``: the model's (the
    full cache's budgets); ``target``: the run's ``c``, where the reference is judged; ``engine``: the
    recipe's engine section (how many are judged at a time); ``baseline(method, target)``: a method's
    allocation (the reference's); ``evaluator(name)``: an evaluator, in generate mode, of the
    pseudo-split ``name`` of drawn candidates (``drawn_slice``).
    """
    rules = section.curate
    budgets = [np.full((geometry.num_layers, geometry.num_kv_heads), FULL_BUDGET, dtype=np.int64)]
    target = float(target)
    if rules.reference_unsolved is not None:
        budgets.append(baseline(rules.reference_unsolved, target).budgets)
    size = slice_size(engine, len(drawn))
    scores: list[list[float]] = [[] for _ in budgets]
    judged = 0
    while judged < len(drawn):
        stop = min(judged + size, len(drawn))
        # Curation judges with what every result is reported with: greedy answers, the task's metric.
        results = evaluator(drawn_slice(split, judged, stop, len(drawn))).evaluate(budgets)
        for what, result, column in zip(("the full cache", rules.reference_unsolved), results, scores):
            if not result.ok:
                raise RuntimeError(f"curating {label}/{split}: evaluating {what} failed: {result.error}")
            by_uid = {o.uid: o.score for o in result.instances}
            column.extend(by_uid[inst.uid] for inst in drawn[judged:stop])
        judged = stop
        kept, full_solved, reference_solved = select(
            [inst.uid for inst in drawn[:judged]], scores[0], scores[1] if len(scores) > 1 else None, section.n)
        if len(kept) >= section.n:
            break  # the first n kept of the whole draw: judging more could not change them
    return Curation(
        task=label, split=split, wanted=section.n, drawn=judged, full_cache_solved=full_solved, kept=len(kept),
        kept_uids=[drawn[i].uid for i in kept], reference=rules.reference_unsolved,
        reference_budget=target if rules.reference_unsolved else None, reference_solved=reference_solved,
        draw=len(drawn),
    )


def is_drawn(split: str) -> bool:
    """Whether ``split`` is a curated split's drawn candidates (all of them, or a slice being judged)."""
    return DRAWN in split


def drawn_slice(split: str, start: int, stop: int, total: int) -> str:
    """The pseudo-split of drawn candidates ``start:stop`` of ``total`` (judged a slice at a time);
    all of them is plainly ``"<split>:drawn"``."""
    return f"{split}{DRAWN}" if (start, stop) == (0, total) else f"{split}{DRAWN}[{start}:{stop}]"


def slice_size(engine, total: int) -> int:
    """How many drawn candidates curation judges at a time: ``engine.batch_size`` in process (the
    batches the whole draw would be decoded in), all of them on an engine that starts workers per split."""
    return max(1, engine.batch_size) if engine.kind == "local" else total


def criteria(section) -> dict:
    """What a stored curation must match to be re-used: the split's size, seed and rules."""
    return {"n": section.n, "seed": section.seed, **asdict(section.curate)}


def load_curation(path: Path | None, label: str, split: str, section) -> Curation | None:
    """The stored curation of ``label``/``split`` if ``path`` holds one made by the same rules."""
    if path is None or not Path(path).is_file():
        return None
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        entry = document["tasks"][label][split]
    except KeyError:
        return None
    except (OSError, ValueError, TypeError) as err:
        raise UserError(f"cannot read the curation record: {err}", source=str(path)) from None
    if entry.get("criteria") != criteria(section):
        raise UserError(f"the stored curation of {label}/{split} was made with other rules "
                        f"({entry.get('criteria')}); this run's recipe asks for {criteria(section)}", source=str(path))
    fields = {k: v for k, v in entry.items() if k != "criteria"}
    return Curation(**fields)


def save_curation(path: Path | None, curation: Curation, section) -> None:
    """Add (or replace) one curation in ``path`` (atomically); nothing when ``path`` is None."""
    if path is None:
        return
    path = Path(path)
    document = {"format": "evolalloc.curation", "version": 1, "tasks": {}}
    if path.is_file():
        document = json.loads(path.read_text(encoding="utf-8"))
    entry = {**asdict(curation), "criteria": criteria(section)}
    document["tasks"].setdefault(curation.task, {})[curation.split] = entry
    write_atomic(path, json.dumps(document, indent=2) + "\n")


def read_curations(path: Path) -> list[Curation]:
    """Every curation stored in a run folder's ``curation.json`` (none if it has no such file)."""
    path = Path(path)
    if not path.is_file():
        return []
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return [Curation(**{k: v for k, v in entry.items() if k != "criteria"})
                for per_split in document["tasks"].values() for entry in per_split.values()]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UserError(f"cannot read the curation record: {err}", source=str(path)) from None
