"""From a mapping to a section dataclass, checked field by field: key names (with a did-you-mean),
types (ints pass as floats, bools never as numbers), and each field's rule in its ``metadata``
(``choices``, ``min``/``max``, ``length``, ``registry``, ``required``). Every problem is one
``FieldProblem`` naming the dotted field; the sections themselves are declared in ``schema.py``.

Nothing here imports torch, optuna or the runtime: checking a recipe must be instant.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import math
import types
import typing
from typing import Any, Union

from evolalloc.core.ranges import range_problem
from evolalloc.registry import UnknownNameError


class FieldProblem(Exception):
    """A problem at ``field`` (dotted path); ``recipe.py`` turns it into a ``UserError``."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


def describe(value: Any) -> str:
    """A value as the user wrote it, e.g. ``a string ('abc')`` — for 'got ...' messages."""
    if value is None:
        return "null"
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)
    text = repr(value)
    return f"{kind} ({text if len(text) <= 40 else text[:37] + '...'})"


def join_path(path: str, key: Any) -> str:
    """``path.key``, or ``key`` at the top level."""
    return f"{path}.{key}" if path else str(key)


def type_options(tp: Any) -> tuple[list[Any], bool]:
    """(non-null types, nullable) of an annotation such as ``int | None``."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = typing.get_args(tp)
        return [a for a in args if a is not type(None)], type(None) in args
    return [tp], False


_TYPE_WORDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false", dict: "a mapping"}


def _type_word(tp: Any) -> str:
    if dataclasses.is_dataclass(tp):
        return "a mapping (section)"
    if typing.get_origin(tp) is list and dataclasses.is_dataclass(typing.get_args(tp)[0]):
        return "a list of mappings (sections)"
    if typing.get_origin(tp) is list:
        return f"a list of {_type_word(typing.get_args(tp)[0]).removeprefix('an ').removeprefix('a ')}s"
    return _TYPE_WORDS[tp]


def _convert(value: Any, tp: Any, path: str) -> Any:
    """``value`` as type ``tp`` or ``FieldProblem``. Ints pass as floats; bools never as numbers."""
    if typing.get_origin(tp) is list:
        if not isinstance(value, list):
            raise FieldProblem(path, f"must be {_type_word(tp)}, got {describe(value)}")
        item = typing.get_args(tp)[0]
        if dataclasses.is_dataclass(item):
            return [build_section(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
        return [_convert(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
    ok = isinstance(value, tp) and not (isinstance(value, bool) and tp is not bool)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is float and ok and not math.isfinite(value):
        raise FieldProblem(path, f"must be a finite number, got {describe(value)}")
    if not ok:
        raise FieldProblem(path, f"must be {_type_word(tp)}, got {describe(value)}")
    if tp is dict and any(not isinstance(k, str) for k in value):
        raise FieldProblem(path, "keys must be strings")
    return value


def registry(reference: str):
    """The ``evolalloc.registry.Registry`` at ``"package.module:NAME"``."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


def _check_rules(value: Any, rules: dict, path: str) -> None:
    if value is None:
        return
    if "registry" in rules:
        try:
            registry(rules["registry"]).check_name(value)
        except UnknownNameError as err:
            raise FieldProblem(path, str(err)) from None
    if "choices" in rules and value not in rules["choices"]:
        close = difflib.get_close_matches(str(value), rules["choices"], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise FieldProblem(path, f"unknown value {value!r}{hint}; choose one of {', '.join(rules['choices'])}")
    problem = range_problem(value, rules) if isinstance(value, (int, float)) else None
    if problem:
        raise FieldProblem(path, problem)
    if "length" in rules and len(value) != rules["length"]:
        raise FieldProblem(path, f"must have exactly {rules['length']} entries, got {len(value)}")


def unknown_key(path: str, key: str, allowed: list[str]) -> FieldProblem:
    close = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return FieldProblem(join_path(path, key), f"unknown field ({hint}allowed: {', '.join(allowed) or 'none'})")


def _section_default(spec: dataclasses.Field, kind: type) -> Any:
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return kind()


def build_section(cls: type, data: Any, path: str = "", base: Any = None) -> Any:
    """An instance of the section dataclass ``cls`` from ``data`` (a mapping, or null = defaults).

    Fields absent from ``data`` keep their value in ``base`` (default: ``cls()``'s defaults).
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise FieldProblem(path or "(top level)", f"must be a mapping (section), got {describe(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            raise unknown_key(path, key, list(fields))
    values = {}
    for name, spec in fields.items():
        where = join_path(path, name)
        kinds, nullable = type_options(hints[name])
        optional_section = dataclasses.is_dataclass(kinds[0]) and nullable and spec.default is None
        if optional_section and data.get(name) is None:
            values[name] = None  # an optional section left out (or null) stays absent
            continue
        if name not in data:
            if spec.metadata.get("required"):
                raise FieldProblem(where, f"missing required field ({spec.metadata['help']})")
            if dataclasses.is_dataclass(kinds[0]):
                # A missing section is an empty one, so its own required fields are still asked for.
                values[name] = build_section(kinds[0], None, where, _section_default(spec, kinds[0]))
            continue  # the dataclass default applies
        value = data[name]
        if dataclasses.is_dataclass(kinds[0]):
            values[name] = build_section(kinds[0], value, where, _section_default(spec, kinds[0]))
            continue
        if value is None:
            if not nullable:
                raise FieldProblem(where, f"must be {_type_word(kinds[0])}, got null")
            values[name] = None
            continue
        values[name] = _convert(value, kinds[0], where)
        _check_rules(values[name], spec.metadata, where)
    return dataclasses.replace(base, **values) if base is not None else cls(**values)
