"""The hybrid's space (``score_prior``, once ``gate_prior``): a searched per-layer prior on the scores
that the global top-k compares (the ``retention-gates`` scorer's).

The ``global-topk`` method keeps, per input, the top ``c * L * H`` (layer, head, token) entries by the
retention gates' calibrated log-utility scores. The hybrid shifts those scores by a per-layer offset before
that one global top-k; CMA-ES searches the offsets. The gates learn from attention traces which
tokens matter; the prior adds what traces cannot teach: which layers the *task's* score needs.

Why the prior travels as budgets: the group-wise loop, the trial store, the evaluators and the
allocation file all carry int64 budgets ``[num_layers, num_kv_heads]``, so the prior is encoded as
budgets and nothing else changes. A candidate's ratios ``x`` decode as in ``layer_groups``
(``round(x * c)``), always completed to exactly ``c * L`` per head (the exact budget rule), so:

* the budgets' total is the number of entries the global top-k keeps: ``c * L * H``, for every
  candidate, whatever its prior (CacheScore is 1 for all of them: memory is not traded);
* the prior is ``log(b / mean(b))`` per (layer, head) (``prior_of``): layer ``l``'s predicted
  utilities are multiplied by ``b_l / c``. Uniform budgets (the search's start, all ratios 1.0)
  are a zero prior, i.e. plain ``global-topk``. Adding one constant to every score changes nothing in
  a global top-k, so only ratios between layers matter and the completion's rescaling loses
  nothing.

Bounds: the usual ratio bounds, ``[min_budget / c, 4]`` by default (the gates always keep 20
tokens per head, so at c = 128 the prior spans ``log(20/128) = -1.86`` to ``log 4 = +1.39``
nats); ``search_space.ratio_bounds`` widens or narrows them. The budget adapter that applies the
prior at run time is ``score_prior`` (``evolalloc.runtime.adaptive.score_prior``).
"""

from __future__ import annotations

import numpy as np

from searchspaces.layer_groups import LayerGroups
from searchspaces.registry import register_search_space

#: The budget adapter (``evolalloc.runtime.adaptive``) that reads these budgets as a prior.
ADAPTER = "score_prior"
#: The scorer whose scores the prior shifts: only the retention gates' are on one scale across layers
#: (``evolalloc.core.scorer_names``; a recipe may say its old name, ``gates``).
SCORER = "retention-gates"


def prior_of(budgets) -> np.ndarray:
    """The prior a hybrid's budgets encode: float64 ``[num_layers, num_kv_heads]``, ``log(b / mean(b))``.

    Exactly 0.0 everywhere for equal budgets (the mean of equal integers is exact). Raises
    ``ValueError`` for a budget below 1 (its log is not a prior).
    """
    array = np.asarray(budgets, dtype=np.float64)
    if array.ndim != 2 or array.size == 0:
        raise ValueError(f"expected budgets [num_layers, num_kv_heads], got shape {array.shape}")
    if np.any(array < 1):
        raise ValueError(f"a score prior's budgets must all be >= 1, got {array.min():g}")
    return np.log(array / array.mean())


#: Decimals of the prior an allocation file records (``recorded_prior``): a reader's copy, checked on load.
PRIOR_DECIMALS = 4


def recorded_prior(budgets) -> list[list[float]]:
    """``prior_of(budgets)`` as an allocation file records it: nested lists, rounded to ``PRIOR_DECIMALS``."""
    return np.round(prior_of(budgets), PRIOR_DECIMALS).tolist()


@register_search_space("score_prior")
class ScorePrior(LayerGroups):
    """One searched offset per layer on the retention gates' scores; every candidate keeps ``c * L * H`` entries."""

    adapter = ADAPTER
    scorers = (SCORER,)

    def __init__(self, **kwargs):
        # Always the exact total: the budgets' sum is what the global top-k keeps.
        kwargs["exact_total"] = True
        super().__init__(**kwargs)
