"""The metric registry: a metric is a pure ``(prediction, references, **extra) -> float`` function,
registered by name with ``@register_metric`` in one file of ``fitness/metrics/``, which the
registry finds by itself (no list to edit).

Its own module, below ``task.py`` (a task scores with a metric) and ``registry.py`` (which re-exports
it next to the task registry), so no import runs in a circle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from evolalloc.registry import Registry
from fitness.errors import UnknownNameError

METRICS: Registry[Callable[..., float]] = Registry("metric", package="fitness.metrics", unknown_error=UnknownNameError)


@dataclass(frozen=True)
class Metric:
    """A registered metric: a pure ``(prediction, references, **extra) -> float`` function."""

    name: str
    fn: Callable[..., float]
    higher_is_better: bool

    def __call__(self, prediction: str, references, **extra) -> float:
        return float(self.fn(prediction, tuple(references), **extra))


def register_metric(name: str, *, higher_is_better: bool = True) -> Callable:
    """Function decorator: register ``fn(prediction, references) -> float`` as ``name``."""
    return METRICS.register(name, higher_is_better=higher_is_better)


def get_metric(name: str) -> Metric:
    return Metric(name, METRICS.get(name), METRICS.info(name)["higher_is_better"])


def list_metrics() -> list[str]:
    """Every metric's name, sorted (the files of ``fitness/metrics/`` are imported first)."""
    return sorted(METRICS.load_all())
