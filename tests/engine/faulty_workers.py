"""Worker actors that misbehave on cue, for the fault tests. They run inside Ray worker processes.

Cues come through a folder shared with the test (``fault_dir``) and through sentinel budgets, so
the test decides exactly which evaluation is hit, and a restarted worker (a fresh object) knows
whether the fault has already happened.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np

from evolalloc.engine.ray_worker import EvalWorker

# Sentinel budgets in [0, 0], far above anything the tests' searches decode (they cap at 200).
DIE_BUDGET = 1001  # kills the worker holding the instance named in fault_dir/mortal, every time
OOM_BUDGET = 1003  # runs out of memory on each shard's first instance


class FaultyWorker(EvalWorker):
    """An ``EvalWorker`` that can be killed mid-evaluation, kill itself, or run out of memory.

    - ``fault_dir/hold`` present and ``fault_dir/killed`` absent: evaluate writes
      ``fault_dir/busy-<pid>`` and waits (up to 60 s) inside the evaluation until the test has
      killed one worker and written ``killed``.
    - a ``DIE_BUDGET`` allocation: the worker holding the instance whose uid is in
      ``fault_dir/mortal`` SIGKILLs its own process (so one shard dies, the others finish).
    - an ``OOM_BUDGET`` allocation: decoding the shard's first instance raises torch's OOM error.
    """

    def __init__(self, spec, fault_dir: str):
        super().__init__(spec)
        self.fault_dir = Path(fault_dir)
        self._install_oom()

    def evaluate(self, budgets, scorer, mode="generate"):
        hold, killed = self.fault_dir / "hold", self.fault_dir / "killed"
        if hold.exists() and not killed.exists():
            (self.fault_dir / f"busy-{os.getpid()}").write_text("")
            deadline = time.monotonic() + 60
            while not killed.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        mortal = self.fault_dir / "mortal"
        if any(int(np.asarray(b)[0, 0]) == DIE_BUDGET for b in budgets) and mortal.exists():
            if mortal.read_text() in {inst.uid for inst in self.instances}:
                os.kill(os.getpid(), signal.SIGKILL)
        return super().evaluate(budgets, scorer, mode)

    def _install_oom(self) -> None:
        """Make ``generate`` raise OOM for (first instance, OOM_BUDGET) rows, as a GPU would."""
        import torch

        import evolalloc.engine.local as local

        real = local.generate
        victim = self.records[0].uid

        def generate(model, rows, *args, **kwargs):
            if any(record.uid == victim and int(budgets[0, 0]) == OOM_BUDGET for record, budgets in rows):
                raise torch.OutOfMemoryError("CUDA out of memory (simulated by the test)")
            return real(model, rows, *args, **kwargs)

        local.generate = generate
