"""Reading a recipe's text: strict YAML (a key given twice is refused), the file itself, the
``--set`` overrides applied on top, and which of them (or which ``base:`` file) to blame for a
faulty field. Nothing here checks what the recipe says: that is ``recipe_checks.py``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

import yaml

from evolalloc.config.recipe_base import Layer, origin_of
from evolalloc.config.section_builder import describe
from evolalloc.core.errors import UserError

OVERRIDE_SOURCE = "--set"


class StrictLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key given twice (PyYAML would silently keep the last one)."""


def _mapping_without_duplicates(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.MarkedYAMLError(
                "while reading a mapping", node.start_mark, f"key {key!r} is given twice", key_node.start_mark
            )
        seen[key] = True
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


def parse_yaml(text: str, source: str, loader: type = StrictLoader) -> Any:
    """``text`` as YAML, or one ``UserError`` naming ``source`` and the line and column."""
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader subclass (the service's is stricter)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else None
        raise UserError(f"not valid YAML: {err.problem or err.context}", source=source, field=where) from None
    except yaml.YAMLError as err:
        raise UserError(f"not valid YAML: {err}", source=source) from None


def read_yaml_file(path: Path) -> Any:
    """The YAML in the file at ``path`` (an empty file is ``{}``), or one ``UserError`` naming it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("no such recipe file", source=str(path)) from None
    except IsADirectoryError:
        raise UserError("is a folder, not a recipe file", source=str(path)) from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read: {err}", source=str(path)) from None
    data = parse_yaml(text, str(path))
    return {} if data is None else data


def apply_overrides(data: Any, overrides: Iterable[str]) -> tuple[Any, dict[str, str]]:
    """``data`` with each ``dotted.key=value`` applied (value parsed as YAML); and which keys."""
    applied: dict[str, str] = {}
    for text in overrides:
        key, sep, raw = text.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise UserError(f"expected KEY=VALUE such as optimizer.sigma0=0.2, got {text!r}", source=OVERRIDE_SOURCE)
        value = parse_yaml(raw, f"{OVERRIDE_SOURCE} {key}")
        if not isinstance(data, dict):
            break  # the file's own top level is wrong; that error comes first
        node, parts = data, key.split(".")
        for i, part in enumerate(parts[:-1]):
            if isinstance(node, list):  # tasks.1.search.n: a list item by its index
                child = node[int(part)] if part.isdigit() and int(part) < len(node) else None
                if child is None:
                    raise UserError(f"cannot set {key}: {'.'.join(parts[:i])} has no item {part}",
                                    source=f"{OVERRIDE_SOURCE} {text}", field=".".join(parts[: i + 1]))
            else:
                child = node.get(part)
                if child is None:
                    child = node[part] = {}
            if not isinstance(child, (dict, list)):
                section = ".".join(parts[: i + 1])
                raise UserError(f"cannot set {key}: {section} is {describe(child)}, not a section",
                                source=f"{OVERRIDE_SOURCE} {text}", field=section)
            node = child
        if isinstance(node, list):
            last = parts[-1]
            if not (last.isdigit() and int(last) < len(node)):
                raise UserError(f"cannot set {key}: {'.'.join(parts[:-1])} has no item {last}",
                                source=f"{OVERRIDE_SOURCE} {text}", field=key)
            node[int(last)] = value
        else:
            node[parts[-1]] = value
        applied[key] = text
    return data, applied


def source_of(field: str, file_source: str, applied: dict[str, str], layers: list[Layer] = ()) -> str:
    """Blame ``--set`` when the faulty field (or a section holding it) came from an override, and
    the base recipe that set it when it was inherited (``base:``)."""
    field = re.sub(r"\[(\d+)\]", r".\1", field)  # tasks[1].weight is set as tasks.1.weight
    for key in applied:
        if field == key or field.startswith(key + ".") or field.startswith(key + "[") or key.startswith(field + "."):
            return f"{OVERRIDE_SOURCE} {applied[key]}"
    return origin_of(field, list(layers)) or file_source
