"""The metrics; importing this package registers them all."""

from fitness.metrics import longbench, matching, overlap, qa  # noqa: F401  (registration)
from fitness.metrics.normalize import normalize_answer

__all__ = ["normalize_answer"]
