"""Tasks and metrics as registries (a leaf package: it imports nothing from ``evolalloc``).

A task yields deterministic ``Instance``s (prompt = context + question, references, decoding
limits) for a split ("search" or "heldout", never sharing an instance); ``Task.score`` returns the
task's own metric and a common score in [0, 1], so fitness over several tasks is a plain mean.

>>> task = get_task("passkey")
>>> [inst] = task.instances("search", 1, seed=0, context_tokens=1024, tokenizer=tok)  # doctest: +SKIP
>>> task.score(inst, " 51973")  # doctest: +SKIP
(1.0, 1.0)
"""

from fitness.errors import FitnessDataError, FitnessError, UnknownNameError
from fitness.instance import Instance
from fitness.registry import Metric, get_metric, get_task, list_metrics, list_tasks, register_metric, register_task
from fitness.task import FITNESS_MODES, Task, check_fitness_mode

__all__ = [
    "FITNESS_MODES",
    "FitnessDataError",
    "FitnessError",
    "Instance",
    "Metric",
    "Task",
    "UnknownNameError",
    "check_fitness_mode",
    "get_metric",
    "get_task",
    "list_metrics",
    "list_tasks",
    "register_metric",
    "register_task",
]
