"""What a submitted recipe may reach: files, models, the trial store and Ray — only what the operator allows.

A recipe sent to the service is a stranger's data, but a job runs it with the service's rights.
So, on top of the recipe schema (the CLI's rules), every place a recipe can name a file or a host
is checked against what the operator configured (``evolalloc serve`` options):

- ``model.spec``: ``bundled:<name>``, or an absolute path inside a ``--model-root``;
- a task's or scorer's file parameter (a ``params`` key named ``*_dir``, ``*_file``, ``*_path``,
  ``*_root``, ``*_folder``, ``checkpoint``..., or any string value starting with ``/`` or ``~``):
  an absolute path inside a ``--data-root`` (a scorer's also inside a ``--model-root``);
- ``checkpoints``' files (the trained scorers a method ranks with): the same as a scorer's, asked of
  the submitted data before the schema checks, which look for the files;
- ``optimizer.start``'s allocation files (a profile a search starts from): the same as a checkpoint's;
- ``storage``: null, or a SQLite / journal file inside the job's own run folder (never the
  service's database, another run's store, a ``sqlite://host/...`` form or a database server);
- ``engine.address``: the service's ``--ray-address``; a recipe naming another one is refused
  (Ray's client unpickles what the server it joins answers).

Paths are resolved with symlinks (``os.path.realpath``) but never ``~``-expanded, relative paths
are refused (relative to whose folder?), and the refusal reads the same whether or not anything
exists at the path: the client learns nothing about the service's file system.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from evolalloc.core.errors import UserError

SOURCE = "recipe"
BUNDLED_PREFIX = "bundled:"  # as evolalloc.runtime.model (not imported: it pulls in torch)
PATH_KEY = re.compile(r"(^|_)(dir|dirs|file|files|path|paths|root|folder|checkpoint|corpus)$", re.IGNORECASE)


def inside(value: str, roots: tuple[Path, ...]) -> bool:
    """True if ``value`` is an absolute path whose real location lies in one of ``roots``."""
    if not isinstance(value, str) or not value or value.startswith("~") or not os.path.isabs(value):
        return False
    try:
        real = Path(os.path.realpath(value))
    except (ValueError, OSError):  # an embedded NUL byte, a loop of links
        return False
    return any(real == root or root in real.parents for root in roots)


def _roots_text(roots: tuple[Path, ...], option: str) -> str:
    if not roots:
        return f"this service allows none (the operator adds folders with {option})"
    return f"allowed: {', '.join(str(r) for r in roots)}"


def check_model(spec: str, model_roots: tuple[Path, ...], field: str = "model.spec") -> None:
    if spec.startswith(BUNDLED_PREFIX):
        return  # the validator checks the name against the bundled list
    if not inside(spec, model_roots):
        raise UserError(f"{spec!r} is not a bundled model nor an absolute path inside a model folder of this "
                        f"service ({_roots_text(model_roots, '--model-root')})", source=SOURCE, field=field)


def _looks_like_path(key: str, value: str) -> bool:
    return bool(PATH_KEY.search(key)) or value.startswith(("/", "~"))


def _check_params(params, roots: tuple[Path, ...], field: str) -> None:
    """Every path-like string in ``params`` (nested mappings and lists too) must lie inside ``roots``."""
    stack = [(field, None, params)]
    while stack:
        where, key, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{where}.{k}", str(k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", key, v) for i, v in enumerate(value))
        elif isinstance(value, str) and key is not None and _looks_like_path(key, value):
            if not inside(value, roots):
                raise UserError(f"{value!r} is not an absolute path inside a data folder of this service "
                                f"({_roots_text(roots, '--data-root')})", source=SOURCE, field=where)


def check_storage(storage: str | None, run_dir: Path) -> None:
    """Null, or a SQLite / journal file inside ``run_dir`` (the job's own run folder)."""
    if storage is None:
        return
    hint = "leave storage null (the study goes into the run folder's study.db) or name a file inside the run folder"
    path = None
    if storage.startswith("journal:"):
        path = storage[len("journal:"):]
    else:
        parts = urlsplit(storage)
        if parts.scheme.split("+")[0].lower() == "sqlite" and not parts.netloc and not parts.query \
                and storage.lower().startswith(("sqlite:///", "sqlite+pysqlite:///")):
            path = storage.split(":///", 1)[1]
    if path is None or not inside(path, (run_dir,)) or Path(os.path.realpath(path)) == run_dir:
        raise UserError(f"a job's trial store may only be inside its own run folder {run_dir}; {hint}",
                        source=SOURCE, field="storage")


def check_checkpoints_reach(raw: object, settings) -> None:
    """``UserError`` naming ``checkpoints.KEY`` unless each checkpoint the submitted data names is an absolute
    path inside a data or model folder. Asked of the data *before* its schema and checks, which look for
    the file: a refusal must read the same whether or not a file exists there."""
    checkpoints = raw.get("checkpoints") if isinstance(raw, dict) else None
    for key, value in checkpoints.items() if isinstance(checkpoints, dict) else ():
        _check_data_or_model_file(value, settings, f"checkpoints.{key}")


def _check_data_or_model_file(value: object, settings, field: str) -> None:
    """``UserError`` naming ``field`` unless ``value`` is an absolute path inside a data or model folder."""
    roots = settings.data_roots + settings.model_roots
    if not inside(value, roots):
        raise UserError(f"{value!r} is not an absolute path inside a data or model folder of this service "
                        f"({_roots_text(roots, '--data-root / --model-root')})", source=SOURCE, field=field)


def check_start_reach(raw: object, settings) -> None:
    """``UserError`` naming ``optimizer.start`` unless each allocation file it names is an absolute path
    inside a data or model folder (asked of the submitted data, as ``check_checkpoints_reach``)."""
    from evolalloc.config.search_start import is_profile_file

    optimizer = raw.get("optimizer") if isinstance(raw, dict) else None
    start = optimizer.get("start") if isinstance(optimizer, dict) else None
    for name in (n.strip() for n in start.split(",")) if isinstance(start, str) else ():
        if is_profile_file(name):
            _check_data_or_model_file(name, settings, "optimizer.start")


def check_reach(raw: object, recipe, settings) -> None:
    """``UserError`` naming the field if ``recipe`` reaches beyond what ``settings`` allow.

    ``raw`` is the submitted data before defaults (to see whether it *names* an engine address).
    On success the recipe's engine address is the service's own.
    """
    engine = raw.get("engine") if isinstance(raw, dict) else None
    given = engine.get("address") if isinstance(engine, dict) else None
    if given is not None and given != settings.ray_address:
        raise UserError(f"a submitted recipe cannot choose where Ray runs (this service uses "
                        f"{settings.ray_address!r}, set by the operator with serve --ray-address); "
                        "leave engine.address out", source=SOURCE, field="engine.address")
    recipe.engine.address = settings.ray_address
    check_model(recipe.model.spec, settings.model_roots)
    tasks = [("task", recipe.task)] if recipe.task is not None else []
    tasks += [(f"tasks[{i}]", t) for i, t in enumerate(recipe.tasks or [])]
    for where, task in tasks:
        _check_params(task.params, settings.data_roots, f"{where}.params")
    _check_params(recipe.scorer.params, settings.data_roots + settings.model_roots, "scorer.params")
    runs_dir = settings.runs_dir.resolve()
    check_storage(recipe.storage, (runs_dir / recipe.name).resolve())
