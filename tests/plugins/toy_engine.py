"""A test-only engine in one file: evaluates one allocation at a time, in-process, and counts them.

It re-uses what every engine shares (the workload's prefill records, ``check_scorer``) and the
local decoder; importing this file registers it as ``toy_serial``.
"""

from __future__ import annotations

from evolalloc.engine.base import Engine, check_scorer, register_engine
from evolalloc.engine.local import LocalEvaluator


@register_engine("toy_serial")
class SerialEngine(Engine):
    def __init__(self, workload, *, batch_size: int = 4):
        super().__init__(workload)
        self.batch_size = batch_size
        self.evaluated = 0

    def evaluator(self, split, scorer, mode="generate"):
        self.check_open()
        records = self.workload.records(split)
        check_scorer(scorer, list(records[0].rankings))
        local = LocalEvaluator(self.workload.loaded, self.workload.task, self.workload.instances(split), scorer,
                               batch_size=self.batch_size, records=records, mode=mode)
        engine = self

        class OneAtATime:
            def evaluate(self, budgets):
                engine.check_open()
                engine.evaluated += len(budgets)
                return [local.evaluate([b])[0] for b in budgets]

        return OneAtATime()
