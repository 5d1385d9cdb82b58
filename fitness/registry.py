"""Metric and task registries (``named_registry.Registry``). Registering a name twice raises
``named_registry.DuplicateNameError``; asking for an unknown name raises ``UnknownNameError``
(``fitness.errors``'s, also a ``named_registry.UnknownNameError``) with the valid names and the
closest one."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from named_registry import BadParametersError, Registry

from fitness.errors import FitnessError, UnknownNameError

if TYPE_CHECKING:
    from fitness.task import Task

METRICS: Registry[Callable[..., float]] = Registry("metric", unknown_error=UnknownNameError)
TASKS: Registry[type["Task"]] = Registry("task", unknown_error=UnknownNameError)


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
    return METRICS.names()


def register_task(name: str) -> Callable[[type["Task"]], type["Task"]]:
    """Class decorator: make a ``Task`` subclass available as ``name``."""
    from fitness.task import Task  # task.py imports this module (get_metric)

    def register(cls: type[Task]) -> type[Task]:
        if not (isinstance(cls, type) and issubclass(cls, Task)):
            raise TypeError(f"task {name!r} must be a Task subclass, got {cls!r}")
        return TASKS.register(name)(cls)

    return register


def list_tasks() -> list[str]:
    return TASKS.names()


def task_class(name: str) -> type["Task"]:
    return TASKS.get(name)


def task_parameters(name: str) -> list[str]:
    """The keyword parameters a task accepts (for recipes and error messages)."""
    params = inspect.signature(task_class(name).__init__).parameters
    return [p for p in params if p != "self" and params[p].kind is inspect.Parameter.KEYWORD_ONLY]


def get_task(name: str, **params) -> "Task":
    """Build task ``name`` with ``params`` (from a recipe); unknown parameters are an error."""
    try:
        return TASKS.create(name, **params)
    except BadParametersError as err:
        raise FitnessError(str(err)) from None
