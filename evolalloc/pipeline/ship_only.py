"""Runs searched and shipped but not compared: ``--seeds ... --compare pick`` compares only the picked seed.

``pipeline.start.ship_run`` searches and ships a new run; ``tidy_shipped`` ends that session: LU-KV's
curves saved to the folder first (profiled on the search records), then the
spilled records removed, so that comparing the run later (``pipeline.run.resume_run``, which replays the
trial store and reads the shipped profiles) never reads them again. ``profiles_shipped`` says whether a
folder got that far: every profile there and the folder tidied (a run killed while being tidied, or in a
comparison, is finished by ``resume_run(ship_only=True)``). Nothing here imports ``pipeline.run``, which
imports this.
"""

from __future__ import annotations

from pathlib import Path

from evolalloc.config.run_folder import RECORDS_FOLDER, load_resolved, profile_filenames, remove_records
from evolalloc.pipeline.experiment import Experiment
from evolalloc.pipeline.wall_clock import end_session


def tidy_shipped(run_dir: Path, experiment: Experiment) -> None:
    """End a session that searched and shipped but does not compare: LU-KV's curves saved, the session's end
    written, the spilled records removed (unless ``engine.keep_records``)."""
    experiment.run.run_dir = Path(run_dir)
    experiment.run.methods.profile_for(experiment.resolved.baselines)
    end_session(run_dir)
    if not experiment.resolved.keep_records:
        remove_records(run_dir)


def profiles_shipped(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds every profile its recipe ships and was tidied after shipping (no spilled
    records left, unless ``engine.keep_records``): a search-and-ship session that finished."""
    run_dir = Path(run_dir)
    resolved = load_resolved(run_dir)
    if not all((run_dir / name).is_file() for name in profile_filenames(resolved.budgets).values()):
        return False
    return resolved.keep_records or not (run_dir / RECORDS_FOLDER).exists()
