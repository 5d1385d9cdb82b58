"""How the run keeps its prefill records: the policy (bounded at ``b_max``, in ``engine.record_dtype``,
spilled beyond ``engine.record_memory``), per-split bounds, and the keeper that applies them.

One ``RunRecords`` per run, shared by every task of a multi-task run: the memory limit is the run's.
"""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import Callable

from evolalloc.pipeline.curation import is_drawn


class RunRecords:
    """Args:
        engine: the recipe's ``engine`` section (``record_dtype``, ``record_memory``).
        model_id: names the model and dtype in each spilled file (a foreign file is never read).
        bound: the run's ``b_max`` (``pipeline/record_bound.py``), called once; None: whole records.
        spill_dir: the folder records spill to (the run folder's ``records/``), asked when the policy
            is first made; None: a temporary folder until ``spill_into`` names the run folder's.
    """

    def __init__(self, engine, model_id: str, bound: Callable[[], int | None], spill_dir: Callable[[], str | None]):
        self.engine, self.model_id = engine, model_id
        self._bound, self._spill_dir = bound, spill_dir
        self.split_bounds: dict[str, int] = {}  # a split's b_max, tighter than the run's (``bound_split``)

    @property
    def made(self) -> bool:
        return "policy" in self.__dict__

    @cached_property
    def policy(self):
        """``runtime.record_store.RecordPolicy``, made once."""
        from evolalloc.core.record_settings import parse_size
        from evolalloc.runtime.record_store import RecordPolicy

        return RecordPolicy(bound=self._bound(), dtype=self.engine.record_dtype,
                            memory=parse_size(self.engine.record_memory),
                            spill_dir=self._spill_dir(), model_id=self.model_id)

    def policy_for(self, split: str):
        """The policy for ``split``'s records: drawn candidates stay whole (curation judges the full cache);
        a split ``bound_split`` tightened is bounded at its own ``b_max``."""
        if is_drawn(split):
            return self.policy.unbounded()
        if split in self.split_bounds:
            return dataclasses.replace(self.policy, bound=self.split_bounds[split])
        return self.policy

    def bound_split(self, split: str, largest: int) -> int | None:
        """Bound ``split``'s records (not made yet) at ``largest`` when that is below the run's ``b_max``;
        returns the bound set, or None (nothing changed)."""
        run_bound = self.policy.bound
        if run_bound is None or largest >= run_bound:
            return None
        self.split_bounds[split] = largest
        return largest

    @cached_property
    def keeper(self):
        """Applies ``policy`` to every record the run prefills."""
        from evolalloc.runtime.record_store import RecordKeeper

        return RecordKeeper(self.policy)

    def spill_into(self, folder: str) -> None:
        """Spill into ``folder`` from now on (the run folder once it exists: resume finds them there)."""
        if self.made:
            self.policy = dataclasses.replace(self.policy, spill_dir=folder)
            self.keeper.policy = self.policy

    def close(self) -> None:
        if "keeper" in self.__dict__:
            self.keeper.close()  # removes a temporary spill folder
