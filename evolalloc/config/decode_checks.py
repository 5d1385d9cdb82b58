"""The recipe checks of ``budget.decode`` (budgets held while decoding), in one place.

The interval's range is the schema's (``core/decode_eviction.py``); here the cross-field rules: every
task's fitness mode must be one that can hold budgets while decoding (no model, no torch), and the
scorer every method ranks with must rank generated tokens (``Scorer.ranks_generated``, read from the
scorer registry with the other names).
"""

from __future__ import annotations

from evolalloc.config.section_builder import FieldProblem
from evolalloc.core.decode_eviction import DecodeEviction, check_decode_mode


def check_decode_modes(recipe, default_mode) -> None:
    """``FieldProblem`` when ``budget.decode`` meets a task whose fitness mode cannot use it.
    ``default_mode(task_name)``: a task's own mode, when the recipe names none."""
    if recipe.budget.decode is None:
        return
    decode = DecodeEviction(recipe.budget.decode.interval)
    for entry in recipe.task_entries:
        mode = recipe.fitness.mode or default_mode(entry.name)
        try:
            check_decode_mode(decode, mode)
        except ValueError as err:
            where = "fitness.mode" if recipe.fitness.mode else "budget.decode"
            raise FieldProblem(where, f"task {entry.name!r}: {err}") from None


def check_decode_scorers(recipe, scorer, baseline_scorers) -> None:
    """``FieldProblem`` when ``budget.decode`` is set and the run's scorer, or a baseline's own
    (``baseline_scorers``: ``(field, scorer name)`` pairs), cannot rank generated tokens."""
    if recipe.budget.decode is None:
        return
    from evolalloc.runtime.decode_eviction import check_decode_scorer
    from evolalloc.runtime.scorers import SCORERS

    named = [("scorer.name", scorer)] + [(field, SCORERS.get(name)) for field, name in baseline_scorers]
    for field, each in named:
        try:
            check_decode_scorer(each)
        except ValueError as err:
            raise FieldProblem(field, f"{err} (budget.decode is set)") from None
