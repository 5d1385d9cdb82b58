"""Strict JSONL reading for data-file tasks: the whole file is checked before anything is used,
and the first problem is reported as one ``FitnessDataError`` naming the file, line and field."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Mapping

# A check returns None when the value is fine, else what is wrong with it.
Check = Callable[[Any], "str | None"]


def is_string(value: Any) -> str | None:
    return None if isinstance(value, str) else f"expected a string, got {type(value).__name__}"


def is_text(value: Any) -> str | None:
    """A string with something in it (a blank context or question is a data mistake, not a prompt)."""
    if not isinstance(value, str):
        return f"expected a string, got {type(value).__name__}"
    return None if value.strip() else "expected text, got a blank string"


def is_string_or_int(value: Any) -> str | None:
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return None
    return f"expected a string or an integer, got {type(value).__name__}"


def is_string_list(value: Any) -> str | None:
    if not isinstance(value, list) or not value:
        return "expected a non-empty list of strings"
    if not all(isinstance(v, str) for v in value):
        return "expected a list of strings"
    return None


def is_text_list(value: Any) -> str | None:
    """A non-empty list of non-blank strings (answers: a blank one would match anything or nothing)."""
    problem = is_string_list(value)
    if problem:
        return problem
    return None if all(v.strip() for v in value) else "expected non-blank strings, got a blank one"


def is_int(value: Any) -> str | None:
    return None if isinstance(value, int) and not isinstance(value, bool) else f"expected an integer, got {value!r}"


def read_jsonl(path: str | Path, required: Mapping[str, Check],
               optional: Mapping[str, Check] | None = None) -> list[tuple[int, dict]]:
    """``[(line number, record)]`` for every non-blank line; raises on the first bad line."""
    from fitness.errors import FitnessDataError

    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FitnessDataError("no such file", file=file) from None
    except IsADirectoryError:
        raise FitnessDataError("is a directory, expected a .jsonl file", file=file) from None
    except UnicodeDecodeError as err:
        raise FitnessDataError(f"not UTF-8 text (byte {err.start})", file=file) from None
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise FitnessDataError(f"not valid JSON ({err.msg} at column {err.colno})", file=file,
                                   line=number) from None
        if not isinstance(record, dict):
            raise FitnessDataError(f"expected a JSON object, got {type(record).__name__}", file=file, line=number)
        for field, check in required.items():
            if field not in record:
                raise FitnessDataError("missing", file=file, line=number, field=field)
            problem = check(record[field])
            if problem:
                raise FitnessDataError(problem, file=file, line=number, field=field)
        for field, check in (optional or {}).items():
            if record.get(field) is not None:
                problem = check(record[field])
                if problem:
                    raise FitnessDataError(problem, file=file, line=number, field=field)
        records.append((number, record))
    if not records:
        raise FitnessDataError("holds no records", file=file)
    return records


def record_identities(records: list[tuple[int, dict]], file: str, text_fields: tuple[str, ...]) -> list[str]:
    """What decides each record's split (``fitness.splits.partition``): its ``id``, which must be
    unique in the file (a repeat is one error naming its line and the first), else a hash of its
    ``text_fields``, so records that repeat the same text without an id stay together."""
    from fitness.errors import FitnessDataError

    first_line: dict[str, int] = {}
    out = []
    for line, record in records:
        if record.get("id") is not None:
            identity = f"id:{record['id']}"
            if identity in first_line:
                raise FitnessDataError(f"{record['id']!r} repeats line {first_line[identity]}'s", file=file,
                                       line=line, field="id")
            first_line[identity] = line
        else:
            text = "\x1f".join(record[name] for name in text_fields)
            identity = "text:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
        out.append(identity)
    return out
