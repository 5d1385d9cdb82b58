"""A submitted recipe: request body -> validated, resolved ``Recipe``, or a ``UserError`` (a 422).

The same schema, defaults and checks as ``evolalloc search``: the body is parsed with the
recipe module's safe YAML loader (JSON is read as JSON), then ``recipe_from_dict`` checks it.
Checking task and scorer *names* needs the scorer registry, which imports torch; the HTTP process
never does, so that last step runs in the validator helper process (``validator.py``).

On top of the CLI's rules, a service must never be made to write outside its runs dir: the run
name is a plain folder name (the recipe schema already insists) and its folder must resolve
inside the runs dir. What else a recipe may reach (files, models, the trial store, Ray) is
``confinement.py``'s.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from evolalloc.config.recipe import Recipe, recipe_from_dict
from evolalloc.core.errors import UserError
from evolalloc.service.limits import load_json, load_yaml

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
        return load_json(text, SOURCE)
    return load_yaml(text, SOURCE)  # no aliases, capped in depth and size


def check_schema(data: object, name: str | None) -> Recipe:
    """Schema, defaults and cross-field rules (no registry look-ups: no torch). ``name`` overrides."""
    if name is not None and isinstance(data, dict):
        data = {**data, "name": name}
    return recipe_from_dict(data, source=SOURCE, default_name="run", check_names=False)


def check_confinement(recipe: Recipe, runs_dir: Path) -> None:
    """``UserError`` if the run folder would lie outside ``runs_dir`` (the trial store, files,
    models and Ray: ``confinement.check_reach``)."""
    runs_dir = runs_dir.resolve()
    folder = (runs_dir / recipe.name).resolve()
    if folder.parent != runs_dir:
        raise UserError(f"run name {recipe.name!r} would leave the runs dir", source=SOURCE, field="name")


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
