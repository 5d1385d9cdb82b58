"""The state of one Ray worker: a model, its shard's prefill records, and local evaluators on them.

A worker is built from a ``WorkerSpec`` — names, parameters and the shard's instance texts — so
it loads the model and prefills its instances itself: no weights or records ever travel. Once
built it answers ``evaluate(budgets, scorer, mode)`` for whole populations, like ``LocalEvaluator``
(which does the work), for as long as it lives. The fitness mode travels with each call, not in
the spec: one pool serves a split in every mode (curation generates, the search may score
likelihoods, on the same prefilled records). A restarted worker is simply built again.

This module imports Ray nowhere: ``EvalWorker`` is a plain class that the pool wraps with
``ray.remote``, so tests can subclass it to inject faults.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from evolalloc.engine.base import EvalResult


def instance_to_wire(instance) -> dict:
    """An ``Instance`` as plain data: its frozen ``metadata`` (a mappingproxy) does not pickle."""
    data = {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)}
    data["metadata"] = dict(instance.metadata)
    return data


def instance_from_wire(data: dict):
    from fitness.instance import Instance

    return Instance(**data)  # __post_init__ freezes the metadata again


@dataclass
class WorkerSpec:
    """Everything a worker needs to rebuild its part of an experiment (all small, all picklable).

    ``instances`` are the shard's instances as ``instance_to_wire`` dicts; ``scorers`` are every
    scorer whose ranking the records must hold (evaluations may use any of them).
    """

    model: str
    dtype: str
    threads: int
    task: str
    task_params: dict
    instances: list[dict]
    scorers: list = field(default_factory=list)
    question_after_compression: bool = False
    batch_size: int = 16
    records: object = None  # a runtime.record_store.RecordPolicy for this shard (None: full records in memory)
    decode: object = None  # a core.decode_eviction.DecodeEviction: budgets held while decoding (None: prompt-only)


class EvalWorker:
    """Loads the model once, prefills its shard once, then evaluates populations on it."""

    def __init__(self, spec: WorkerSpec):
        import torch

        from evolalloc.runtime.instances import prefill_instances
        from evolalloc.runtime.model import load_model
        from fitness import get_task

        # A worker owns its threads: torch's default (all cores) would oversubscribe the
        # machine as soon as two workers share it.
        torch.set_num_threads(spec.threads)
        self.spec = spec
        self.loaded = load_model(spec.model, dtype=spec.dtype)
        self.task = get_task(spec.task, **spec.task_params)
        self.instances = [instance_from_wire(d) for d in spec.instances]
        from evolalloc.runtime.record_store import RecordKeeper

        # The shard's records are bounded, narrowed and spilled (into the run folder) as the
        # experiment's own would be, and re-used from there by a resumed or restarted worker.
        self.keeper = RecordKeeper(spec.records) if spec.records is not None else None
        self.records = prefill_instances(self.loaded, self.instances, spec.scorers,
                                         question_after_compression=spec.question_after_compression, keeper=self.keeper)
        self._evaluators: dict[tuple[str, str], object] = {}  # (scorer key, mode) -> LocalEvaluator

    def ready(self) -> int:
        """Number of records held; returning at all means construction (load + prefill) is done."""
        return len(self.records)

    def pid(self) -> int:
        return os.getpid()

    def evaluate(self, budgets: Sequence[np.ndarray], scorer, mode: str = "generate") -> list[EvalResult]:
        """One result per budget array ``[num_layers, num_kv_heads]``, on this worker's shard."""
        return self._evaluator(scorer, mode).evaluate(budgets)

    def _evaluator(self, scorer, mode: str):
        from evolalloc.engine.local import LocalEvaluator

        # An adapted scorer (AdaKV, CAKE, global-topk) shares its key, and so its rankings, with the
        # plain one, but selects differently: cache evaluators by what selects the tokens.
        key = (getattr(scorer, "selection_key", scorer.key), mode)
        if key not in self._evaluators:
            self._evaluators[key] = LocalEvaluator(
                self.loaded, self.task, self.instances, scorer, batch_size=self.spec.batch_size, records=self.records,
                mode=mode, decode=self.spec.decode)
        return self._evaluators[key]
