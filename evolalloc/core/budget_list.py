"""A list of budgets written on a command line ("48,64"), read one way everywhere.

Benchmark scripts and tools take expansion budgets as one comma-separated option; each used to
parse it with its own loop and message. Here: positive, finite numbers, at least one, or a
``UserError`` naming the option (the caller prints it as one line and exits 2).
"""

from __future__ import annotations

import math

from evolalloc.core.errors import UserError


def parse_budgets(text: str, option: str) -> list[float]:
    """``"48,64"`` -> ``[48.0, 64.0]`` (empty parts skipped); anything else a ``UserError`` naming ``option``."""
    try:
        budgets = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        budgets = []
    if not budgets or not all(math.isfinite(b) and b > 0 for b in budgets):
        raise UserError(f"expected positive budgets such as 48,64, got {text!r}", field=option)
    return budgets


__all__ = ["parse_budgets"]
