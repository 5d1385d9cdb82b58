"""A list of budgets or sizes written on a command line ("48,64"), read one way everywhere.

Benchmark scripts and CLI commands take budgets, context sizes and counts as one comma-separated
option; each used to parse it with its own loop and message. Here: positive, finite numbers
(whole numbers where the caller says so), empty parts skipped, at least one unless the caller
allows none — or a ``UserError`` naming the option (the CLI prints it as one line and exits 2).
"""

from __future__ import annotations

import math

from evolalloc.core.errors import UserError


def parse_budgets(text: str, option: str, *, whole: bool = False, allow_empty: bool = False) -> list:
    """``"48,64"`` -> ``[48.0, 64.0]`` (``whole``: ``[48, 64]``), in the order written.

    ``allow_empty``: ``""`` is ``[]`` (an optional sweep); otherwise at least one value is required.
    Anything else raises a ``UserError`` whose message starts with ``option``.
    """
    kind = "positive whole numbers" if whole else "positive numbers"
    parts = [part.strip() for part in text.split(",") if part.strip()]
    try:
        values = [int(part) if whole else float(part) for part in parts]
    except ValueError:
        values = None
    if values is None or not all(math.isfinite(v) and v > 0 for v in values):
        raise UserError(f"must be {kind} separated by commas, such as 48,64; got {text!r}", field=option)
    if not values and not allow_empty:
        raise UserError(f"must list at least one value ({kind} such as 48,64); got {text!r}", field=option)
    return values


__all__ = ["parse_budgets"]
