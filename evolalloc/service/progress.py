"""A job's progress, read from what its worker leaves: the trial store and the run folder.

The search writes every finished evaluation to its Optuna study (``evolalloc.search.store``)
and the config it searches with into the study's ``config`` attribute, so evaluations done,
evaluations planned and the best fitness so far all come from there; the run folder tells the
phase (search -> compare -> done). Nothing here imports torch (optuna does not).

The service only ever *reads* a trial store, and only once the worker has finished creating it:
the study is opened after the run's first checkpoint exists (``start_search`` writes it right after
creating the study), never creating tables (``skip_table_creation``), and a SQLite file is opened
read-only. (Opening it earlier raced the worker's schema creation: both inserted Optuna's
``alembic_version`` row and the worker failed.)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from evolalloc.config.run_folder import REPORT_FILE
from evolalloc.search.checkpoint import has_checkpoint
from evolalloc.search.loop import STUDY_FILE
from evolalloc.service.recipes import _MEMORY, storage_file

# Read-only trial stores, most recently used last; bounded, so a service that has seen thousands
# of jobs does not hold a connection pool (and its file descriptors) open for each of them.
MAX_OPEN_STORES = 16
_storages: OrderedDict[str, object] = OrderedDict()
_storages_lock = threading.Lock()


@dataclass
class Progress:
    done: int = 0
    planned: int | None = None
    best_fitness: float | None = None
    phase: str | None = None
    history: list[dict] = field(default_factory=list)  # one entry per stored evaluation, search order
    best_budgets: list[list[int]] | None = None  # [layers][kv_heads] of the best evaluation so far


def study_url(run_dir: Path, storage: str | None) -> str:
    """The trial store's URL, as ``evolalloc.search.loop.storage_url`` computes it."""
    return storage or f"sqlite:///{(run_dir.resolve() / STUDY_FILE).as_posix()}"


def _storage(url: str):
    """A read-only view of a trial store, cached per URL (opening one costs a connection pool)."""
    with _storages_lock:
        if url in _storages:
            _storages.move_to_end(url)
        else:
            import optuna

            from evolalloc.search.store import driver_url, open_storage

            if url.startswith("journal:"):
                _storages[url] = open_storage(url)
            else:
                path = storage_file(url)
                if path is not None:  # SQLite: read-only, through SQLite's URI form
                    url_ro = f"sqlite:///file:{Path(path).resolve().as_posix()}?mode=ro&uri=true"
                else:
                    url_ro = driver_url(url)
                _storages[url] = optuna.storages.RDBStorage(url_ro, skip_table_creation=True,
                                                            skip_compatibility_check=True)
            while len(_storages) > MAX_OPEN_STORES:
                forget(next(iter(_storages)))
        return _storages[url]


def forget(url: str) -> None:
    """Close a cached trial store (a job that ended; the oldest one when the cache is full).
    Called with ``_storages_lock`` held or from the scheduler; a reader using it reconnects."""
    from evolalloc.search.store import close_storage

    storage = _storages.pop(url, None)
    if storage is not None:
        close_storage(storage)


def release(run_dir: Path, storage: str | None) -> None:
    """Close the trial store of a job that ended (a later read opens it again)."""
    with _storages_lock:
        forget(study_url(run_dir, storage))


def open_stores() -> int:
    return len(_storages)


def phase_of(run_dir: Path) -> str | None:
    """The phase the run folder shows, named as the worker announces them (``core/phases.py``): the
    service's fallback where a worker left no phase file."""
    if (run_dir / REPORT_FILE).exists():
        return "done"
    if any(run_dir.glob("allocation-c*.json")):
        return "comparing"
    if has_checkpoint(run_dir):
        return "searching"
    return "starting" if run_dir.exists() else None


def read_progress(run_dir: Path, storage: str | None, study_name: str, *, with_history: bool = False) -> Progress:
    """Progress of the run in ``run_dir`` (zeros when its study does not exist yet)."""
    import optuna

    from evolalloc.search.config import SearchConfig
    from evolalloc.search.store import TrialStore

    progress = Progress(phase=phase_of(run_dir))
    url = study_url(run_dir, storage)
    if not has_checkpoint(run_dir) or storage_file(url) is _MEMORY:
        return progress  # the worker may still be creating the study: do not touch it
    try:
        study = optuna.load_study(study_name=study_name, storage=_storage(url))
    except KeyError:  # the study is not created yet
        return progress
    config_dict = study.user_attrs.get("config")
    if not config_dict:
        return progress
    config = SearchConfig(**{**config_dict, "ratio_bounds": tuple(config_dict["ratio_bounds"])
                             if config_dict.get("ratio_bounds") else None})
    space = config.build_space()
    progress.planned = config.planned_evaluations()  # a converging search's cap: it may finish below it
    records = TrialStore(study, space.ratio_bounds).records()
    progress.done = len(records)
    best = None
    for record in records:
        if record.ok and (best is None or record.fitness > best.fitness):
            best = record
        if with_history:
            progress.history.append({
                "group": record.group, "generation": record.generation, "candidate": record.candidate,
                "state": record.state, "fitness": record.fitness, "task_score": record.task_score,
                "mean_budget": record.mean_budget, "best_fitness": best.fitness if best else None,
            })
    if best is not None:
        progress.best_fitness = best.fitness
        progress.best_budgets = best.budgets
    return progress
