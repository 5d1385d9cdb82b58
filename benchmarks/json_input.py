"""One reader for the JSON files benchmark scripts take as input (pages' scores, their own outputs).

A file that is missing, not JSON, or has no object under ``field`` is a ``UserError`` naming it, which
each script's ``main`` prints as one line with exit 2: the same message from every script.
"""

from __future__ import annotations

import json
from pathlib import Path

from evolalloc.core.errors import UserError


def read_json_object(path: str | Path, field: str, origin: str) -> dict:
    """The JSON object in ``path``, which must hold an object under ``field``; ``origin`` names what writes
    such files (``benchmarks/search_versus.py``), for the message when it does not."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read it: {err}", source=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get(field), dict):
        raise UserError(f"no field {field} (not a file of {origin})", source=str(path))
    return data
