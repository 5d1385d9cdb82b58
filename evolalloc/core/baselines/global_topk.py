"""One top-k over every (layer, head, token) by the retention gates' scores (paper 001): the
``global-topk`` method, with no per-layer budgets at all. ``gates``, its old name, still loads.

The allocation holds uniform budgets only for their total ``c * L * H``; per instance the runtime
keeps the top ``c * L * H`` (layer, head, token) entries by the ``retention-gates`` scorer's
calibrated scores (adapter ``global``, ``runtime.adaptive.global_topk``), every head keeping at
least its always-kept tokens. Only that scorer's scores are on one scale across layers, so the rule
declares it; it needs a checkpoint from ``evolalloc gates train`` (default: ``core.paths``).
"""

from __future__ import annotations

from dataclasses import dataclass

from evolalloc.core.baselines import register_baseline
from evolalloc.core.baselines.uniform import Uniform
from evolalloc.core.paths import CHECKPOINT_ALWAYS_KEPT, resolve_checkpoint
from evolalloc.core.scorer_names import RETENTION_GATES

#: The checkpoint kind of the retention gates (``core.paths``: the file ``evolalloc gates train`` writes).
GATES_CHECKPOINT = "gates"


@register_baseline("global-topk")
@dataclass
class GlobalTopK(Uniform):
    default = False
    checkpoint: str = ""  # "": the retention gates' default checkpoint (core.paths)
    # the scorer's always-kept tokens (a run's own, e.g. anchored gates' 0 and 32)
    sinks: int = CHECKPOINT_ALWAYS_KEPT["sinks"]
    window: int = CHECKPOINT_ALWAYS_KEPT["window"]

    @property
    def scorer(self):
        params = {"checkpoint": str(resolve_checkpoint(GATES_CHECKPOINT, self.checkpoint))}
        # Only when not the scorer's defaults, so the allocation files of default gates stay as they were.
        params.update({k: v for k, v in (("sinks", self.sinks), ("window", self.window))
                       if v != CHECKPOINT_ALWAYS_KEPT[k]})
        return (RETENTION_GATES, params)

    @property
    def min_target(self) -> float:
        return self.sinks + self.window  # the scorer's always-kept tokens per head

    @property
    def adapter(self):
        return ("global", {})

    def problem(self):
        path = resolve_checkpoint(GATES_CHECKPOINT, self.checkpoint)
        if not path.is_file():
            return (f"method {self.name!r} needs a {RETENTION_GATES} checkpoint at {path}; "
                    "train one with `evolalloc gates train TRACES`")
        return None

    def provenance(self, *, reserved=0):
        return {}  # the checkpoint is in scorer_params
