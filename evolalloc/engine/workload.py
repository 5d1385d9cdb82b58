"""The workload: everything an engine needs to evaluate allocations, and nothing more.

The pipeline builds one per experiment (``Experiment.workload``) and hands it to the engine it
creates. An engine never sees the recipe or the experiment: the model to (re)load, the task, the
scorers whose rankings the records hold (each with its ``CaptureSpec``), how rows are batched and
where workers run are plain values here; the expensive parts (the loaded model, the instances
of a split and their prefill records) are providers, called when an engine first needs them, so
a Ray engine never loads the model in the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class Workload:
    """One experiment's evaluation inputs (single task).

    ``records(split)`` are the prefill records of ``instances(split)``, one per instance, holding a
    ranking ``[layers, Hkv, L]`` for every scorer in ``scorers()``; ``record_policy_for(split)``
    says how a worker keeps its own shard's records (``None``: in memory, whole).
    """

    model_spec: str
    dtype: str
    task_name: str
    task_params: Mapping[str, Any]
    question_after_compression: bool
    batch_size: int  # rows (instance x allocation) per forward
    workers: int = 1
    threads: int | None = None  # torch threads per worker (None: the engine's default)
    address: str | None = None  # a Ray cluster to join (None: start one on this machine)
    decode: Any = None  # core.decode_eviction.DecodeEviction: budgets held while decoding; None: prompt-only
    load_model: Callable[[], Any] = field(default=None, repr=False)  # -> runtime.model.LoadedModel
    load_task: Callable[[], Any] = field(default=None, repr=False)  # -> fitness.Task
    scorers: Callable[[], list] = field(default=list, repr=False)
    instances: Callable[[str], list] = field(default=None, repr=False)
    records: Callable[[str], list] = field(default=None, repr=False)
    record_policy_for: Callable[[str], Any] | None = field(default=None, repr=False)

    @property
    def loaded(self):
        """The loaded model (the provider loads it once)."""
        return self.load_model()

    @property
    def task(self):
        return self.load_task()
