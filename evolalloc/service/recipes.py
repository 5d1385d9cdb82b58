"""A submitted recipe: request body -> validated, resolved ``Recipe``, or a ``UserError`` (a 422).

The same schema, defaults and checks as ``evolalloc search``: the body is parsed with the
recipe module's safe YAML loader (JSON is read as JSON), then ``recipe_from_dict`` checks it.
Checking task and scorer *names* needs the scorer registry, which imports torch; the HTTP process
never does, so that last step runs in the validator helper process (``validator.py``).

On top of the CLI's rules, a service must never be made to write outside its runs dir:

- the run name is a plain folder name (the recipe schema already insists) and its folder must
  resolve inside the runs dir;
- ``storage`` (the trial store URL) is refused when it names a *file* outside the runs dir
  (``sqlite:///...``, ``journal:...``) or an in-memory database (a job must survive a restart).
  Refused rather than rewritten: a silently moved study is one its owner cannot find; the 422
  says what to do (leave it null: the study goes into the run folder). Server databases
  (``postgresql://``, ``mysql://``...) write no file here and are allowed.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlsplit

from evolalloc.config.recipe import Recipe, _parse_yaml, recipe_from_dict
from evolalloc.core.errors import UserError

SOURCE = "recipe"  # how errors name the request body
JSON_TYPES = ("application/json",)


def parse_body(body: bytes, content_type: str | None) -> object:
    """The body as plain data: JSON if the content type says so, safe YAML otherwise."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError("the body is not UTF-8 text", source=SOURCE) from None
    if not text.strip():
        raise UserError("the body is empty: send a recipe as YAML or JSON", source=SOURCE)
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind in JSON_TYPES:
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise UserError(f"not valid JSON: {err.msg}", source=SOURCE, field=f"line {err.lineno}, column {err.colno}") from None
    return _parse_yaml(text, SOURCE)


def check_schema(data: object, name: str | None) -> Recipe:
    """Schema, defaults and cross-field rules (no registry look-ups: no torch). ``name`` overrides."""
    if name is not None and isinstance(data, dict):
        data = {**data, "name": name}
    return recipe_from_dict(data, source=SOURCE, default_name="run", check_names=False)


def check_confinement(recipe: Recipe, runs_dir: Path) -> None:
    """``UserError`` if the run folder or the trial store would lie outside ``runs_dir``."""
    runs_dir = runs_dir.resolve()
    folder = (runs_dir / recipe.name).resolve()
    if folder.parent != runs_dir:
        raise UserError(f"run name {recipe.name!r} would leave the runs dir", source=SOURCE, field="name")
    if recipe.storage is None:
        return
    path = storage_file(recipe.storage)
    if path is _MEMORY:
        raise UserError("an in-memory trial store cannot survive a restart; leave storage null "
                        "(the run folder's study.db) or give a database server URL", source=SOURCE, field="storage")
    if path is not None and not _inside(path, runs_dir):
        raise UserError(f"{recipe.storage!r} is a file outside the service's runs dir; leave storage null "
                        "(the study goes into the run folder) or give a database server URL", source=SOURCE, field="storage")


_MEMORY = object()


def storage_file(url: str):
    """The file a trial-store URL writes: a ``Path``, ``_MEMORY``, or ``None`` for a server database."""
    if url.startswith("journal:"):
        return Path(url[len("journal:"):])
    scheme = urlsplit(url).scheme.split("+")[0].lower()
    if scheme != "sqlite":
        return None
    path = url.split("://", 1)[1]
    path = path.split("?", 1)[0]
    if path in ("", "/", "/:memory:") or "mode=memory" in url:
        return _MEMORY
    return Path(path[1:])  # sqlite:///relative or sqlite:////absolute: drop the separator slash


def _inside(path: Path, root: Path) -> bool:
    if not path.is_absolute():
        return False  # relative to whose working directory? refuse rather than guess
    resolved = path.resolve()
    return resolved == root or root in resolved.parents
