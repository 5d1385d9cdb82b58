"""One job's pipeline in its own process: ``python -m evolalloc.service.worker ...``.

The service starts it in a new session (so cancel can kill its whole process group) and reads
the outcome from its exit status: 0 finished, 2 a user error (the one-line message is written
to ``--error-file``), anything else a crash (the error file holds the exception's last line;
the traceback stays in the job's log).

Never two workers on one job. A service killed with SIGKILL cannot stop its workers, and the
restarted service launches the job again (to resume it). So:

- the worker holds an exclusive ``flock`` on the job's lock file for its whole life; the kernel
  drops it when the process dies, however it dies. A second worker waits for it before touching
  the run folder, so at any moment at most one process runs a job;
- the worker dies with its service: ``PR_SET_PDEATHSIG`` on Linux sends it SIGTERM, whose handler
  kills the worker's whole process group, and a watchdog thread that sees the parent change
  (portable) does the same. The old worker is then
  gone within a second, the new one gets the lock and resumes from the checkpoint and the trial
  store, which only ever hold finished evaluations: none is lost or repeated.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

LOCK_WAIT_SECONDS = float(os.environ.get("EVOLALLOC_WORKER_LOCK_WAIT", "120"))  # tests shorten it
EXIT_USER_ERROR = 2
EXIT_LOCKED = 75  # another worker still holds the job after LOCK_WAIT_SECONDS
PHASE_WRITE_SECONDS = 0.5  # progress within a phase is written at most this often (a phase change at once)


def _end_group(*_args) -> None:
    """Kill this worker's whole process group (itself and anything it started, e.g. a local Ray)."""
    os.killpg(os.getpgid(0), signal.SIGKILL)


def _die_with_parent(parent: int) -> None:
    # SIGTERM (the service's cancel and shutdown, or the kernel when the service dies) ends the
    # whole group at once: a Python-level exit could leave grandchildren behind.
    signal.signal(signal.SIGTERM, _end_group)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: the kernel signals us when the service dies
        except OSError:
            pass

    def watch() -> None:  # portable fallback, and a guard if a signal handler is held up in C code
        while True:
            if os.getppid() != parent:
                _end_group()
            time.sleep(0.5)

    if os.getppid() != parent:  # the parent died before we could ask to follow it
        _end_group()
    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def _acquire(lock_path: Path):
    handle = open(lock_path, "a+")  # noqa: SIM115 - held open for the life of the process
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                return None
            time.sleep(0.2)


def run_job(recipe_file: Path, runs_dir: Path, name: str, attempt: int) -> None:
    """Start the run (first attempt) or resume it (later attempts), through to the report."""
    import shutil

    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import REPORT_FILE
    from evolalloc.pipeline.run import resume_run
    from evolalloc.pipeline.start import start_run
    from evolalloc.search.checkpoint import has_checkpoint

    recipe = load_recipe(recipe_file)
    run_dir = runs_dir / name
    if attempt > 1 and run_dir.is_dir():
        if (run_dir / REPORT_FILE).exists():
            return  # finished before the service could record it
        if has_checkpoint(run_dir):
            resume_run(run_dir, progress=False)
            return
        # An earlier attempt of this job died between claiming the folder and writing the first
        # checkpoint: no evaluation exists yet. Clear its start and begin again.
        _drop_empty_study(run_dir, recipe)
        shutil.rmtree(run_dir)
    # Every check before anything is written, then search, ship, compare, report (as `search` does).
    start_run(recipe, runs_dir, recipe.name, progress=False)


def _drop_empty_study(run_dir: Path, recipe) -> None:
    """A study created by an attempt that died before its first checkpoint holds no trial: drop it,
    so the search can create it again (a study with trials is never touched)."""
    import optuna

    from evolalloc.search.loop import storage_url
    from evolalloc.search.store import close_storage, open_storage

    url = storage_url(run_dir, recipe)  # reads only ``.storage``, which the recipe has too
    if url.startswith("sqlite") and not (run_dir / "study.db").exists():
        return
    storage = open_storage(url)
    try:
        study = optuna.load_study(study_name=recipe.name, storage=storage)
        if not study.get_trials(deepcopy=False):
            optuna.delete_study(study_name=recipe.name, storage=storage)
    except KeyError:
        pass
    finally:
        close_storage(storage)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="evolalloc.service.worker")
    parser.add_argument("--recipe-file", type=Path, required=True)
    parser.add_argument("--runs-dir", type=Path, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--attempt", type=int, required=True)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--lock", type=Path, required=True)
    parser.add_argument("--error-file", type=Path, required=True)
    parser.add_argument("--result-file", type=Path, required=True)
    parser.add_argument("--phase-file", type=Path, default=None)
    args = parser.parse_args(argv)

    _die_with_parent(args.parent)
    lock = _acquire(args.lock)
    if lock is None:
        args.error_file.write_text("another worker still runs this job", encoding="utf-8")
        return EXIT_LOCKED
    args.error_file.unlink(missing_ok=True)
    if args.phase_file is not None:
        _report_phases(args.phase_file)

    from evolalloc.core.errors import UserError

    _quiet_libraries()
    try:
        run_job(args.recipe_file, args.runs_dir, args.name, args.attempt)
    except UserError as err:
        args.error_file.write_text(str(err), encoding="utf-8")
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USER_ERROR
    except BaseException as err:  # noqa: BLE001 - a crash: the log keeps the traceback, the job row one line
        traceback.print_exc()
        line = f"{type(err).__name__}: {err}".splitlines()[0] if str(err) else type(err).__name__
        args.error_file.write_text(line, encoding="utf-8")
        return 1
    _write_result(args.result_file, args.runs_dir / args.name)
    return 0


def _report_phases(path: Path) -> None:
    """Write each phase the pipeline announces (``core/phases.py``) to ``path`` for the service:
    a new phase at once, progress within one at most every ``PHASE_WRITE_SECONDS``."""
    import json

    from evolalloc.core import phases
    from evolalloc.core.fileio import write_atomic

    last = {"phase": None, "at": 0.0}

    def write(phase: str, done, total) -> None:
        now = time.monotonic()
        if phase == last["phase"] and now - last["at"] < PHASE_WRITE_SECONDS and done != total:
            return
        if phase != last["phase"]:
            last["since"] = time.time()
        last.update(phase=phase, at=now)
        write_atomic(path, json.dumps({"phase": phase, "done": done, "total": total, "since": last["since"]}))

    phases.listen(write)
    phases.announce("starting")  # importing the libraries, checking the recipe: before any slow step


def _quiet_libraries() -> None:
    """The job log is for the service's operator: no progress bars, no library chatter."""
    import logging

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    logging.getLogger("optuna").setLevel(logging.WARNING)


def _write_result(path: Path, run_dir: Path) -> None:
    """What the service needs to register the run's profiles that only torch-side code knows:
    the budget floor of the recipe's scorer (its always-kept tokens), used when expanding."""
    import json

    from evolalloc.config.run_folder import load_run_recipe
    from evolalloc.core.fileio import write_atomic
    from evolalloc.runtime.scorers import get_scorer

    recipe = load_run_recipe(run_dir)
    scorer = get_scorer(recipe.scorer.name, **recipe.scorer.params)
    write_atomic(path, json.dumps({"min_budget": scorer.min_budget}))


if __name__ == "__main__":
    sys.exit(main())
