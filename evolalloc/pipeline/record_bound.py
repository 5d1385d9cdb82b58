"""``b_max``: the most tokens any allocation of a run can give one (layer, KV head) — the one place
it is computed (``Experiment.record_policy`` calls it once; records are bounded by it).

What a run evaluates, and the most each gives one unit:

* search candidates at ``c``, and the searched profile carried to each expansion ``c'``:
  ``ceil(hi * c')``, ``hi`` the search space's upper ratio bound (4 by default). A proportional
  expansion multiplies a unit by ``c'/c``; an additive one adds ``c' - c`` (less). Under the
  ``exact`` budget rule, completion rescales a candidate to ``c * units`` and may push a unit a
  little past ``hi * c``; the evaluator then prefills the affected instances again in full
  (exact, and said on the console) rather than bounding ``b_max`` by the theoretical worst case
  (a unit holding almost the whole total), which would bound nothing.
* each static baseline at every budget ``compare`` uses (the target and its expansions): its
  budgets' maximum (PyramidKV's bottom layer can exceed ``hi * c``).
* input-adaptive methods (AdaKV, CAKE, global-topk) may move budget between heads without
  limit; here they are capped at ``b_max`` per unit: a bounded record's scores stop at
  ``b_max`` (``runtime/bounded.py``), so none of them gives a head more. This is a choice: with
  ``hi = 4`` it binds only when one head would take more than four times the largest budget.
* curation's reference (uniform at ``c``) is within all of these; its full-cache judgment is
  made on whole records, bounded once the kept instances are chosen.
"""

from __future__ import annotations

import math

from evolalloc.core.baselines import make_baseline


def record_bound(targets, upper_ratio: float, baseline_budgets) -> int:
    """``b_max`` from the run's budgets ``targets`` (the target, then its expansions), the search
    space's upper ratio bound, and ``baseline_budgets(name, target) -> [L, H] budgets`` of each
    static baseline (``None`` for one that adapts per instance or cannot run at that target)."""
    bound = max(math.ceil(upper_ratio * float(c) - 1e-9) for c in targets)
    for budgets in baseline_budgets:
        if budgets is not None:
            bound = max(bound, int(budgets.max()))
    return int(bound)


def run_record_bound(targets, config, baselines, methods) -> int:
    """``b_max`` of a run (see the module docstring): its budgets ``targets`` (the target, its
    expansions or its curve's grid), its search's ``config`` (``Experiment.search_config``: the
    space's upper ratio bound), the names of its ``baselines`` and its ``methods``
    (``pipeline/run_methods.py``), which make each static baseline's budgets on the model."""
    targets = [float(c) for c in targets]
    upper = config.build_space().ratio_bounds[1]  # the search space resolves its default bound

    def static(name: str, target: float):
        baseline = make_baseline(name)
        # A profiled baseline (lukv) is profiled on these very records: its budgets are not known
        # before them (asking would recurse); a unit it gives more than b_max is prefilled again in full.
        if (
            baseline.adapter is not None
            or baseline.adapts is not None
            or baseline.profiled
            or target < baseline.min_target
        ):
            return None
        return methods.baseline(name, target).budgets

    return record_bound(targets, upper, (static(name, c) for name in baselines for c in targets))
