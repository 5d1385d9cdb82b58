"""The search loop (EvolKV's Algorithm 1), its optimizer back-ends, trial store and checkpoint.

Model-free: it talks to an ``evolalloc.engine.base.Evaluator``. Entry points::

    run_search(run_dir, evaluator, SearchConfig(...)) -> SearchResult
    resume_search(run_dir, evaluator[, config=...]) -> SearchResult   (replays the stored trials)
"""

from evolalloc.search.config import SearchConfig, default_popsize
from evolalloc.search.loop import GroupwiseSearch, SearchResult, resume_search, run_search
from evolalloc.search.store import TrialRecord

__all__ = ["GroupwiseSearch", "SearchConfig", "SearchResult", "TrialRecord", "default_popsize", "resume_search", "run_search"]
