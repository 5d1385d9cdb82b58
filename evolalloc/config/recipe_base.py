"""``base:`` — a recipe that names another recipe and overrides a few of its keys.

    # runs/my_study.yaml
    base: passkey_snapkv.yaml          # relative to this file's folder
    name: my_study
    budget: {target: 64}               # only what differs

The chain (a base may name its own base) is read and merged before anything is validated, so the
merged mapping is checked like any recipe file and the run folder's ``recipe.yaml`` is the merged,
resolved recipe: a run never depends on the base file after it starts. Merge rules, the same at
every depth: a mapping merges key by key; anything else (a list, a number, a string, null)
replaces. One exception: ``scorer.params`` belong to their scorer, so a file that names another
``scorer.name`` than its base does not inherit the base's params (SnapKV's ``kernel`` means nothing
to the retention gates); it gets its own ``params`` or the scorer's defaults. A base's ``name`` is not
inherited: a run is named by its own file (its ``name:`` or its stem), so two recipes on one base
never compete for one run folder.

Refused, in one line naming the file and ``base``: a base that is not a file, a base that is not
a string, and a cycle (the message spells the chain). ``origin_of`` tells which file of the chain
gave a field, so a bad value inherited from a base is blamed on the base, not on the child.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, Callable

from evolalloc.config.schema import ScorerSection
from evolalloc.config.section_builder import describe
from evolalloc.core.errors import UserError

BASE_KEY = "base"

#: One file of a chain: how it is named in messages, and its own mapping (``base`` removed).
Layer = tuple[str, dict]


def read_with_bases(path: Path, read: Callable[[Path], Any]) -> tuple[Any, list[Layer]]:
    """The recipe at ``path`` merged over its ``base`` chain, and the chain (``path`` first).

    ``read`` parses one file (the recipe module's strict YAML reader). A file whose top level is
    not a mapping is returned as read, for the schema to refuse with its usual message.
    """
    layers: list[Layer] = []
    seen: list[Path] = []
    current, shown = path, str(path)
    while True:
        seen.append(current.resolve())
        data = read(current)
        if not isinstance(data, dict):
            if layers:  # a base that is not a mapping cannot be merged into anything
                raise UserError(f"a base recipe must be a mapping, got {describe(data)}", source=shown,
                                field="(top level)")
            return data, []
        # A base's name is not inherited: the run is named by the file that was run.
        dropped = (BASE_KEY, "name") if layers else (BASE_KEY,)
        layers.append((shown, {key: value for key, value in data.items() if key not in dropped}))
        if BASE_KEY not in data:
            break
        current, shown = _next_base(data[BASE_KEY], current, shown, seen, [name for name, _ in layers])
    merged: dict = {}
    for _, own in reversed(layers):
        merged = deep_merge(_without_other_scorers_params(merged, own), own)
    return merged, layers


def _without_other_scorers_params(merged: dict, own: dict) -> dict:
    """``merged`` less its ``scorer.params`` when ``own`` names another scorer (see the module docstring)."""
    ours, theirs = own.get("scorer"), merged.get("scorer")
    if not (isinstance(ours, dict) and isinstance(theirs, dict) and "params" in theirs):
        return merged
    if "name" not in ours or ours["name"] == theirs.get("name", ScorerSection.name):
        return merged
    return {**merged, "scorer": {key: value for key, value in theirs.items() if key != "params"}}


def _next_base(value: Any, current: Path, shown: str, seen: list[Path], chain: list[str]) -> tuple[Path, str]:
    """The file ``base: value`` in ``current`` names, refused when missing or closing a cycle."""
    if not isinstance(value, str) or not value.strip():
        raise UserError("must be the path of a recipe file, relative to this recipe's folder", source=shown,
                        field=BASE_KEY)
    target = current.parent / value
    named = os.path.normpath(Path(shown).parent / value)
    if target.resolve() in seen:
        loop = " -> ".join([*chain, named])
        raise UserError(f"base recipes form a cycle: {loop}", source=shown, field=BASE_KEY)
    if not target.is_file():
        raise UserError(f"no such base recipe file: {named}", source=shown, field=BASE_KEY)
    return target, named


def deep_merge(base: Any, override: Any) -> Any:
    """``override`` over ``base``: mappings merge key by key (recursively), anything else replaces.

    Neither argument is modified; the result shares no mutable part with them.
    """
    if not (isinstance(base, dict) and isinstance(override, dict)):
        return copy.deepcopy(override)
    merged = copy.deepcopy(base)
    for key, value in override.items():
        merged[key] = deep_merge(merged[key], value) if key in merged else copy.deepcopy(value)
    return merged


def origin_of(field: str, layers: list[Layer]) -> str | None:
    """The name of the first file of the chain (child first) that sets ``field`` (dotted, list
    items by index), or None when no file does (a missing field, a default)."""
    parts = [part for part in field.split(".") if part]
    for name, own in layers:
        node: Any = own
        for part in parts:
            if not isinstance(node, dict):
                break  # a list or value set here replaced everything below it
            if part not in node:
                node = _ABSENT
                break
            node = node[part]
        if node is not _ABSENT:
            return name
    return None


_ABSENT = object()
