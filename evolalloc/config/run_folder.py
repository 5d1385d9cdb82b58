"""The run folder a recipe creates: its file names, and creating it without overwriting anything.

A run folder (``runs/<name>/``) holds::

    recipe.yaml               the resolved recipe, written first
    run.json                  what it resolved to (``config/resolved.py``), written with it: the report reads this
    study.db                  the Optuna trial store (unless storage is another URL)
    search_checkpoint.json    how far the search got (evolalloc.search.checkpoint; JSON, no pickle)
    allocation-c{N}.json      the evolved profile at the target and at each expansion (or curve budget)
    profile-curve.json        budget.curve only: every grid budget's profile, which were searched
    curve/c{N}/               budget.curve only: the search of each other anchor (study, checkpoint)
    comparison.json           held-out scores per method and budget (``compare``)
    curation.json             how many instances each curated split drew and kept
    report.md, *.png          the report and its plots
    sessions.json             when each session of the run started and ended (the report's wall time)
    records/                  spilled prefill records: what a killed run resumes from; removed when the
                              run finishes unless ``engine.keep_records`` (``evolalloc clean RUN`` too)

The names live here, below the search and report layers, so every command agrees on them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from evolalloc.config.recipe import Recipe, load_recipe
from evolalloc.config.resolved import ResolvedRun, parse_resolved, resolve_run, resolved_json
from evolalloc.core.errors import UserError
from evolalloc.core.fileio import write_atomic

# Re-exported: the run folder's file names in one place (the search owns its checkpoint and trial store names).
from evolalloc.search.checkpoint import CHECKPOINT_NAME as CHECKPOINT_FILE  # noqa: F401
from evolalloc.search.checkpoint import LEGACY_CHECKPOINT_NAME as LEGACY_CHECKPOINT_FILE  # noqa: F401 (older pickles; refused)
from evolalloc.search.checkpoint import STUDY_FILE  # noqa: F401

RECIPE_FILE = "recipe.yaml"
RUN_FILE = "run.json"
COMPARISON_FILE = "comparison.json"
CURATION_FILE = "curation.json"
REPORT_FILE = "report.md"
PLOT_LAYER_BUDGETS = "budgets-per-layer.png"
PLOT_HEAD_BUDGETS = "budgets-per-head.png"
PLOT_FITNESS = "fitness-over-evaluations.png"
PLOT_SCORE_VS_BUDGET = "score-vs-budget.png"
RECORDS_FOLDER = "records"  # spilled prefill records (``runtime/record_store.py``)
SESSIONS_FILE = "sessions.json"  # ``pipeline/wall_clock.py``


PROFILE_PATTERN = "allocation-c*.json"  # the evolved profiles' names (``allocation_filename``)


def allocation_filename(budget: float, method: str = "evolved") -> str:
    """``allocation-c128.json`` for the evolved profile, ``uniform-c128.json`` for a baseline."""
    label = int(budget) if float(budget).is_integer() else budget
    prefix = "allocation" if method == "evolved" else method
    return f"{prefix}-c{label}.json"


def profile_filenames(budgets) -> dict[float, str]:
    """``{budget: allocation-c{N}.json}`` for the evolved profile at each of ``budgets``, in their order:
    a step names every profile it writes or reads with one call, not one per budget."""
    return {float(budget): allocation_filename(budget) for budget in budgets}


def profile_files(run_dir: str | Path) -> list[Path]:
    """Every evolved profile file in ``run_dir`` (``allocation-c*.json``), the run's own and any a user
    carried further (``expand --to``), sorted by name. Only the name's shape is used: a caller takes
    each profile's budget from the file itself, never from its name."""
    return sorted(p for p in Path(run_dir).glob(PROFILE_PATTERN) if p.is_file())


def searched_profile(run_dir: str | Path):
    """The profile a finished run searched: its smallest budget (the others are expansions of it).

    A ``UserError`` naming the folder when it holds no profile (not a finished run)."""
    from evolalloc.core.allocation_file import load_allocation

    files = profile_files(run_dir)
    if not files:
        raise UserError("no allocation-c*.json: not a finished run folder", source=str(run_dir), field="runs")
    return min((load_allocation(p) for p in files), key=lambda a: a.target)


def missing_outputs(run_dir: str | Path, resolved: ResolvedRun) -> list[str]:
    """The files a finished run holds that ``run_dir`` lacks (empty: the run is finished).

    The profiles, the comparison and the report are written in that order, the report last.
    """
    names = [*profile_filenames(resolved.budgets).values(), COMPARISON_FILE, REPORT_FILE]
    if resolved.curve_grid:
        from evolalloc.core.curve import CURVE_FILE

        names.insert(0, CURVE_FILE)  # written before the profiles
    return [name for name in names if not (Path(run_dir) / name).is_file()]


def run_folder_path(recipe: Recipe, runs_dir: str | Path = "runs", name: str | None = None) -> Path:
    """``runs_dir/<name or recipe.name>``, checked to be a plain name that is not taken yet.

    A cheap early check, so a start-up does not load a model only to find the name taken;
    ``create_run_folder`` claims the folder for real.
    """
    folder_name = name or recipe.name
    if not folder_name or Path(folder_name).name != folder_name or folder_name in (".", ".."):
        raise UserError(f"run name must be a plain folder name, got {folder_name!r}", field="name")
    folder = Path(runs_dir) / folder_name
    if folder.exists():
        raise _taken(folder)
    return folder


def _taken(folder: Path) -> UserError:
    return UserError(
        "run folder already exists; a run is never overwritten: resume it, delete it, or pass another name",
        source=str(folder),
    )


def create_run_folder(recipe: Recipe, runs_dir: str | Path = "runs", name: str | None = None, *,
                      resolved: ResolvedRun | None = None) -> Path:
    """Create ``runs_dir/<name or recipe.name>/`` and write the resolved ``recipe.yaml`` and what it
    resolved to (``run.json``: ``resolved``, the caller's ``ResolvedRun`` of this recipe, else resolved
    here) into it.

    Refuses (``UserError``) a folder that already exists, even an empty one: a run folder is
    never overwritten or reused. ``mkdir`` without ``exist_ok`` is the claim, so two runs
    started at once cannot both get the folder. If writing the recipe fails, the folder is
    removed again, so a failed start leaves nothing behind. (``pipeline.start.prepare_run``
    checks everything else a run needs before calling this.)
    """
    folder = run_folder_path(recipe, runs_dir, name)
    try:
        Path(runs_dir).mkdir(parents=True, exist_ok=True)
        folder.mkdir()
    except FileExistsError:
        raise _taken(folder) from None
    except OSError as err:
        raise UserError(f"cannot create the run folder: {err}", source=str(folder)) from None
    try:
        texts = {RECIPE_FILE: recipe.to_yaml(),
                 RUN_FILE: resolved_json(resolved if resolved is not None else resolve_run(recipe))}
        for name, text in texts.items():
            write_atomic(folder / name, text)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def load_run_recipe(run_dir: str | Path, *, check_names: bool = False) -> Recipe:
    """The resolved recipe saved in a run folder (``UserError`` if the folder holds none)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError("no such run folder", source=str(run_dir))
    path = run_dir / RECIPE_FILE
    if not path.is_file():
        raise UserError(f"not a run folder: it holds no {RECIPE_FILE}", source=str(run_dir))
    return load_recipe(path, _as_written_then(path), check_names=check_names)


def _as_written_then(path: Path) -> list[str]:
    """Overrides that keep a run folder's recipe meaning what it meant to the evolalloc that wrote it.

    A saved recipe holds every key its writer knew, defaults filled in; a key added since takes
    today's default when the recipe is read. For ``optimizer.start`` that default (``best``) changes
    the search, so a recipe saved without the key started at uniform (EvolKV), and is read so."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return []  # load_recipe says what is wrong with it
    optimizer = data.get("optimizer") if isinstance(data, dict) else None
    return ["optimizer.start=uniform"] if isinstance(optimizer, dict) and "start" not in optimizer else []


def load_resolved(run_dir: str | Path) -> ResolvedRun:
    """What the run in ``run_dir`` resolved to: its ``run.json``. A folder made before that file
    existed is resolved once from its ``recipe.yaml`` (the same values; nothing is written)."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        return resolve_run(load_run_recipe(run_dir))
    return parse_resolved(path.read_text(), str(path))


def folder_bytes(folder: str | Path) -> int:
    """The bytes of every file under ``folder`` (0 when it does not exist)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file() and not p.is_symlink())


def remove_records(run_dir: str | Path) -> int:
    """Delete the run folder's spilled prefill records (``records/``); returns the bytes freed.

    A finished run never reads them again; an unfinished one would prefill its prompts again on
    ``resume`` (same records, same scores: only the time is lost)."""
    folder = Path(run_dir) / RECORDS_FOLDER
    if not folder.is_dir():
        return 0
    freed = folder_bytes(folder)
    shutil.rmtree(folder)
    return freed
