"""A numeric range written as data, and its one check.

The code that owns a setting declares its range as a mapping in the recipe schema's rule words
(``{"min": 1}``, ``{"min_exclusive": 0.0, "max": 1.0}``) and checks values with ``range_problem``;
the schema takes the same mapping for its field, so each bound is written once and a recipe and
a direct call are refused with the same words.
"""

from __future__ import annotations

import math
from typing import Any, Mapping


def range_problem(value: Any, rule: Mapping[str, Any]) -> str | None:
    """What is wrong with ``value`` under ``rule`` ("must be >= 1, got 0"), or None if it is in range.

    ``rule`` keys: ``min`` (inclusive), ``min_exclusive``, ``max`` (inclusive); others are ignored.
    A float that is not finite is never in range (NaN compares false to every bound).
    """
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value!r}"
    if "min" in rule and value < rule["min"]:
        return f"must be >= {rule['min']}, got {value!r}"
    if "min_exclusive" in rule and value <= rule["min_exclusive"]:
        return f"must be > {rule['min_exclusive']}, got {value!r}"
    if "max" in rule and value > rule["max"]:
        return f"must be <= {rule['max']}, got {value!r}"
    return None
