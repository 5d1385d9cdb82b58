"""Global retention gates (paper 001) as a method: no per-layer budgets at all.

The allocation holds uniform budgets only for their total ``c * L * H``; per instance the
runtime keeps the top ``c * L * H`` (layer, head, token) entries by the ``gates`` scorer's
calibrated scores (``runtime.adaptive.global_topk``), every head keeping at least its
always-kept tokens. Needs a checkpoint from ``evolalloc gates train`` (default: ``core.paths``).
"""

from __future__ import annotations

from dataclasses import dataclass

from evolalloc.core.baselines import register_baseline
from evolalloc.core.baselines.uniform import Uniform
from evolalloc.core.paths import CHECKPOINT_ALWAYS_KEPT, resolve_checkpoint


@register_baseline("gates")
@dataclass
class GlobalGates(Uniform):
    default = False
    checkpoint: str = ""  # "": the gates scorer's default checkpoint (core.paths)
    # the gates scorer's always-kept tokens (a run's own, e.g. anchored gates' 0 and 32)
    sinks: int = CHECKPOINT_ALWAYS_KEPT["sinks"]
    window: int = CHECKPOINT_ALWAYS_KEPT["window"]

    @property
    def scorer(self):
        params = {"checkpoint": str(resolve_checkpoint("gates", self.checkpoint))}
        # Only when not the scorer's defaults, so the allocation files of default gates stay as they were.
        params.update({k: v for k, v in (("sinks", self.sinks), ("window", self.window))
                       if v != CHECKPOINT_ALWAYS_KEPT[k]})
        return ("gates", params)

    @property
    def min_target(self) -> float:
        return self.sinks + self.window  # the gates scorer's always-kept tokens per head

    @property
    def adapter(self):
        return ("global", {})

    def problem(self):
        path = resolve_checkpoint("gates", self.checkpoint)
        if not path.is_file():
            return f"method 'gates' needs a gates checkpoint at {path}; train one with `evolalloc gates train TRACES`"
        return None

    def provenance(self, *, reserved=0):
        return {}  # the checkpoint is in scorer_params
