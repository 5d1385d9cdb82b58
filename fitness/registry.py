"""Metric and task registries (``evolalloc.registry.Registry``). Registering a name twice raises
``evolalloc.registry.DuplicateNameError``; asking for an unknown name raises ``UnknownNameError``
(``fitness.errors``'s, also a ``evolalloc.registry.UnknownNameError``) with the valid names and the
closest one.

Both are found by file: a task is one module of ``fitness/tasks/``, a metric one of
``fitness/metrics/`` (the metric registry lives in ``fitness.metric``, re-exported here).
"""

from __future__ import annotations

import inspect
from typing import Callable

from evolalloc.registry import BadParametersError, Registry
from fitness.errors import FitnessError, UnknownNameError
from fitness.metric import METRICS, Metric, get_metric, list_metrics, register_metric
from fitness.task import Task

TASKS: Registry[type[Task]] = Registry("task", package="fitness.tasks", unknown_error=UnknownNameError)


def register_task(name: str) -> Callable[[type[Task]], type[Task]]:
    """Class decorator: make a ``Task`` subclass available as ``name``."""

    def register(cls: type[Task]) -> type[Task]:
        if not (isinstance(cls, type) and issubclass(cls, Task)):
            raise TypeError(f"task {name!r} must be a Task subclass, got {cls!r}")
        return TASKS.register(name)(cls)

    return register


def list_tasks() -> list[str]:
    """Every task's name, sorted (the files of ``fitness/tasks/`` are imported first)."""
    return sorted(TASKS.load_all())


def task_class(name: str) -> type[Task]:
    return TASKS.get(name)


def task_parameters(name: str) -> list[str]:
    """The keyword parameters a task accepts (for recipes and error messages)."""
    params = inspect.signature(task_class(name).__init__).parameters
    return [p for p in params if p != "self" and params[p].kind is inspect.Parameter.KEYWORD_ONLY]


def get_task(name: str, **params) -> Task:
    """Build task ``name`` with ``params`` (from a recipe); unknown parameters are an error."""
    try:
        return TASKS.create(name, **params)
    except BadParametersError as err:
        raise FitnessError(str(err)) from None


__all__ = ["METRICS", "TASKS", "Metric", "get_metric", "get_task", "list_metrics", "list_tasks", "register_metric",
           "register_task", "task_class", "task_parameters"]
