"""Position heuristic: the SIP paper's baseline (arXiv 2025, "On the limits of learned importance
scoring"): keep the first ``sinks`` tokens and the most recent ones.

It ranks like ``streaming``; it is registered under its own name so that comparisons following
the SIP protocol report it as that paper does, and its sink count can differ.
"""

from __future__ import annotations

from dataclasses import dataclass

from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.streaming import Streaming


@register_scorer("position")
@dataclass
class Position(Streaming):
    sinks: int = 4
