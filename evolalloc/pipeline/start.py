"""Starting a run: check everything it needs, and only then create its folder.

``prepare_run`` is the one start-up path (the ``search`` command, and a service that starts runs,
call it). A start refused for bad input leaves nothing behind, and is refused as early as it can
be: checks run in order of cost. First what needs no model weights — the run name, an external
trial store opened and checked (reachable, the study name free), the model's config
(``task.context_tokens`` must fit its positions), the scorers and the search settings (built on
the geometry from the config); then each uncurated split's instances (the dataset read with the
tokenizer only, each instance checked to fit); then the model loaded; then the curated splits
(judged with the model) — all before anything is written. Then the folder is claimed (``mkdir``,
atomic), ``recipe.yaml`` written and the study and first checkpoint created; if any
of these few writes fails, the folder (and the study, if it was created) is removed again.

Why not build the folder under a temporary name and rename it into place: ``rename`` silently
replaces an existing *empty* folder, so the claim would no longer be atomic, and the default
SQLite store inside the folder would have to be reopened under the new path. The writes after
the claim are few and fast; the slow, failure-prone checks all come before it.

``start_run`` is the one place a new run is driven from start to report (the ``search`` command,
``--seeds`` and the service's worker): it makes the experiment (``prepare_run``), runs it
(``pipeline.run.run_prepared``: search, ship, compare), closes it however that ends, and then
writes the report (``pipeline.run.report_and_tidy``). ``prepare_run`` closes the experiment itself
when a check refuses the start, so a refused start leaves no engine and no temporary record folder
behind either.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from evolalloc.core.errors import UserError
from evolalloc.pipeline.experiment import Experiment
from evolalloc.search.config import SearchConfig

SPLITS = ("search", "heldout")


@dataclass
class PreparedRun:
    """A run whose folder, study and first checkpoint exist, with its experiment ready.

    ``experiment`` has its model loaded and both splits' instances generated; whoever holds the
    ``PreparedRun`` closes it (``start_run`` does). ``started``: when the start began
    (``time.time()``), so the run's wall time counts its checks, model load and curation.
    """

    run_dir: Path
    recipe: object
    experiment: Experiment
    config: SearchConfig
    started: float = dataclasses.field(default_factory=time.time)


@contextmanager
def blamed_on(recipe):
    """A ``UserError`` naming a field but no file is re-raised naming the recipe's file."""
    try:
        yield
    except UserError as err:
        if err.source is not None:
            raise
        message = str(err)[len(err.field) + 2:] if err.field else str(err)
        raise UserError(message, source=recipe.source, field=err.field) from None


def check_context_fits(recipe) -> None:
    """``task.context_tokens`` against the model's positions, from the model's config alone."""
    from evolalloc.runtime.model import model_geometry
    from evolalloc.runtime.positions import positions_beyond

    try:
        limit = model_geometry(recipe.model.spec, recipe.model.dtype).max_positions
    except UserError as err:  # the runtime names its own field ("model", "dtype"): say where in the recipe
        where = ": ".join(part for part in (err.source, err.field) if part)
        message = str(err)[len(where) + 2:] if where else str(err)
        field = "model.dtype" if err.field == "dtype" else "model.spec"
        raise UserError(message, source=recipe.source, field=field) from None
    for i, entry in enumerate(recipe.task_entries):  # task, or each of tasks
        context = entry.context_tokens
        where = f"tasks[{i}].context_tokens" if recipe.multi_task else "task.context_tokens"
        if context is not None and positions_beyond(limit, context, answer=1):  # room for one answer token at least
            raise UserError(f"{context} tokens do not fit the model's {limit} positions ({recipe.model.spec}); "
                            f"choose fewer than {limit}", source=recipe.source, field=where)


def prepare_run(recipe, runs_dir: str | Path = "runs", name: str | None = None, *,
                progress: bool = True, started: float | None = None) -> PreparedRun:
    """Check everything a run needs, then create ``runs_dir/<name>`` with its recipe, study and checkpoint.

    Raises ``UserError`` (and writes nothing) for any bad input: a taken or bad run name, a missing
    model, a context longer than the model's positions, a dataset line the task refuses, search
    settings that do not fit the model, a trial store that cannot be opened or already holds the
    study.
    """
    from evolalloc.config.run_folder import run_folder_path
    from evolalloc.pipeline.search_settings import quiet_optuna
    from evolalloc.search.store import check_study_name_free

    started = time.time() if started is None else started  # the command's start (process_clock), if given
    run_folder_path(recipe, runs_dir, name)  # cheap: refuse a taken name before loading anything
    quiet_optuna()  # the study is created below; Optuna's INFO line about it is noise
    if name and name != recipe.name:
        # The run's name is also its study's name in the trial store: two runs of one recipe
        # under different --name values must not share (or be refused for) one study.
        source = recipe.source
        recipe = dataclasses.replace(recipe, name=name)
        recipe.source = source
    # Cheapest first: the trial store (reachable, the study name free: it needs nothing of the
    # model), the model's config, the scorers and the search settings (seconds), then the
    # datasets (the tokenizer only), then the model's weights, then curation (prefill + decoding).
    if recipe.storage:
        with blamed_on(recipe):
            check_study_name_free(recipe.storage, recipe.name)  # the study is named after the run
    check_context_fits(recipe)
    # Resolved here and handed over, so the recipe's path enters config/ for it before the experiment,
    # not from inside it (issue 37: benchmarks/recipe_path.py counts how often each module is entered).
    experiment = Experiment(recipe, progress=progress, resolved=recipe.resolved)
    try:
        run_dir, config = _checked_and_claimed(experiment, runs_dir, name)
    except BaseException:
        experiment.close()  # a refused start leaves no engine, no temporary record folder
        raise
    return PreparedRun(run_dir=run_dir, recipe=recipe, experiment=experiment, config=config, started=started)


def _checked_and_claimed(experiment: Experiment, runs_dir: str | Path, name: str | None) -> tuple[Path, SearchConfig]:
    """The checks that need the experiment's pieces, in order of cost, then the folder claimed with
    its recipe, study and first checkpoint; returns the folder and the search's settings."""
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.search.loop import start_search

    recipe = experiment.recipe
    model, scorers = experiment.run.model, experiment.run.scorers  # the pieces a start checks, in turn
    scorers.check_without_weights()  # the scorer section, and the baselines' scorers unless it is trained here
    with blamed_on(recipe):
        config = experiment.search_config  # the geometry from the model's config alone
        if experiment.resolved.curve_grid:
            from evolalloc.pipeline.curve import check_anchors

            check_anchors(experiment.resolved, config, scorers.min_budget)
    curated = experiment.draw_instances(SPLITS)  # reads the datasets, checks each instance fits the positions
    model.loaded  # noqa: B018 - the weights: a model that cannot load is refused before the folder exists
    # With scorer.train, the scorer's checkpoint path is keyed by the model's weight fingerprint: only
    # now can the scorers be built (issue 21: they used to load the weights before the settings check).
    scorers.all  # noqa: B018
    # A missing, unreadable or foreign scorer checkpoint (curation ranks with it).
    scorers.check_checkpoints(model.loaded.model, model.geometry)
    check_start_files(experiment, config)  # a start's allocation files: there, and this model's
    for part, split in curated:
        part.instances(split)  # judges the drawn candidates with the model
    run_dir = create_run_folder(recipe, runs_dir, name, resolved=experiment.resolved)
    try:
        start_search(run_dir, config).close()  # run_prepared opens it again, like resume
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise
    return run_dir, config


def check_start_files(experiment: Experiment, config: SearchConfig) -> None:
    """Each allocation file ``optimizer.start`` names, read and carried to ``c`` now (after the scorers, whose
    always-kept tokens bound it): a missing file or another model's profile is refused before the folder
    exists and the curation's forwards, not after the prefill."""
    from evolalloc.config.search_start import is_profile_file

    for name in config.start:
        if is_profile_file(name):
            experiment.run.methods.file_budgets(name, config.target)


def ship_run(recipe, runs_dir: str | Path = "runs", *, progress: bool = True) -> Path:
    """A new run searched and shipped, not compared (``pipeline/ship_only.py``): its folder holds the
    profiles and no comparison or report; ``resume_run`` compares it. Returns the folder."""
    from evolalloc.pipeline.run import evolved_allocation, search_prepared, ship
    from evolalloc.pipeline.ship_only import tidy_shipped

    prepared = prepare_run(recipe, runs_dir, progress=progress)
    try:
        experiment, config = prepared.experiment, prepared.config
        result = search_prepared(prepared, progress)
        ship(prepared.run_dir, experiment, evolved_allocation(experiment, result, config), config, progress)
        tidy_shipped(prepared.run_dir, experiment)
    finally:
        prepared.experiment.close()
    return prepared.run_dir


def start_run(recipe, runs_dir: str | Path = "runs", name: str | None = None, *, progress: bool = True,
              started: float | None = None, on_folder: Callable[[Path], None] | None = None) -> PreparedRun:
    """A new run from its checks to its report (``prepare_run``, ``pipeline.run.run_prepared``, then
    ``pipeline.run.report_and_tidy``); its experiment is closed (engine, Ray workers, records) however
    the run ends, and before the report, which needs none of it.

    ``on_folder``: called with the run folder once it exists, before the search (the ``search``
    command prints it). Returns the finished run's ``PreparedRun`` (its experiment closed; its
    ``experiment.resolved`` is what the recipe resolved to). Raises ``UserError``, writing nothing,
    for anything ``prepare_run`` refuses.
    """
    from evolalloc.pipeline.run import report_and_tidy, run_prepared

    prepared = prepare_run(recipe, runs_dir, name, progress=progress, started=started)
    try:
        if on_folder is not None:
            on_folder(prepared.run_dir)
        compared = run_prepared(prepared, progress=progress)
    except BaseException:
        prepared.experiment.close()
        raise
    try:
        prepared.experiment.close()  # engine, Ray workers, records: the report needs none of them
    finally:
        report_and_tidy(compared)  # a close that fails (a Ray shutdown) does not cost the run its report
    return prepared
