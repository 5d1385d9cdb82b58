"""Metric and task registries. Registering a name twice or asking for an unknown name raises
``UnknownNameError`` listing the valid names (and the closest one)."""

from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from fitness.errors import FitnessError, UnknownNameError

if TYPE_CHECKING:
    from fitness.task import Task

_METRICS: dict[str, "Metric"] = {}
_TASKS: dict[str, type["Task"]] = {}


@dataclass(frozen=True)
class Metric:
    """A registered metric: a pure ``(prediction, references, **extra) -> float`` function."""

    name: str
    fn: Callable[..., float]
    higher_is_better: bool

    def __call__(self, prediction: str, references, **extra) -> float:
        return float(self.fn(prediction, tuple(references), **extra))


def _unknown(kind: str, name: str, valid: list[str]) -> UnknownNameError:
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return UnknownNameError(f"unknown {kind} {name!r}{hint}; valid names: {', '.join(valid)}")


def register_metric(name: str, *, higher_is_better: bool = True) -> Callable:
    """Function decorator: register ``fn(prediction, references) -> float`` as ``name``."""

    def register(fn: Callable[..., float]) -> Callable[..., float]:
        if name in _METRICS:
            raise UnknownNameError(f"metric {name!r} is already registered; registered: {', '.join(list_metrics())}")
        _METRICS[name] = Metric(name, fn, higher_is_better)
        return fn

    return register


def get_metric(name: str) -> Metric:
    if name not in _METRICS:
        raise _unknown("metric", name, list_metrics())
    return _METRICS[name]


def list_metrics() -> list[str]:
    return sorted(_METRICS)


def register_task(name: str) -> Callable[[type["Task"]], type["Task"]]:
    """Class decorator: make a ``Task`` subclass available as ``name``."""
    from fitness.task import Task

    def register(cls: type[Task]) -> type[Task]:
        if name in _TASKS:
            raise UnknownNameError(f"task {name!r} is already registered; registered: {', '.join(list_tasks())}")
        if not (isinstance(cls, type) and issubclass(cls, Task)):
            raise TypeError(f"task {name!r} must be a Task subclass, got {cls!r}")
        cls.name = name
        _TASKS[name] = cls
        return cls

    return register


def list_tasks() -> list[str]:
    return sorted(_TASKS)


def task_class(name: str) -> type["Task"]:
    if name not in _TASKS:
        raise _unknown("task", name, list_tasks())
    return _TASKS[name]


def task_parameters(name: str) -> list[str]:
    """The keyword parameters a task accepts (for recipes and error messages)."""
    params = inspect.signature(task_class(name).__init__).parameters
    return [p for p in params if p != "self" and params[p].kind is inspect.Parameter.KEYWORD_ONLY]


def get_task(name: str, **params) -> "Task":
    """Build task ``name`` with ``params`` (from a recipe); unknown parameters are an error."""
    valid = task_parameters(name)
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise FitnessError(
            f"task {name!r} has no parameter {', '.join(map(repr, unknown))}; "
            f"valid parameters: {', '.join(valid) or '(none)'}"
        )
    return task_class(name)(**params)
