"""The search loop (EvolKV's Algorithm 1), its optimizer back-ends, trial store and checkpoint.

Model-free: it talks to an ``evolalloc.engine.base.Evaluator``. Entry points::

    run_search(run_dir, evaluator, SearchConfig(...)) -> SearchResult
    resume_search(run_dir, evaluator[, config=...]) -> SearchResult   (replays the stored trials)

The names below are imported on first use (PEP 562), so importing a submodule such as
``evolalloc.search.optimizers`` (the recipe checks its registry) does not import optuna.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "SearchConfig": "evolalloc.search.config",
    "default_popsize": "evolalloc.search.config",
    "GroupwiseSearch": "evolalloc.search.loop",
    "SearchResult": "evolalloc.search.loop",
    "resume_search": "evolalloc.search.loop",
    "run_search": "evolalloc.search.loop",
    "TrialRecord": "evolalloc.search.store",
}

__all__ = ["GroupwiseSearch", "SearchConfig", "SearchResult", "TrialRecord", "default_popsize", "resume_search",
           "run_search"]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
