"""pycma evaluates string options as Python expressions: only typed values of allow-listed options pass."""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.core.errors import UserError
from evolalloc.search.optimizers import check_optimizer_options, get_optimizer


@pytest.mark.parametrize("options", [
    {"maxiter": "9**9**9**9"},  # an expression pycma would evaluate (and never finish)
    {"tolfun": "__import__('os').getpid()"},
    {"CMA_active": "True"},  # a string, not a boolean
    {"CMA_active": 1},
    {"maxiter": True},
    {"maxiter": -1},
    {"maxiter": 10**400},
    {"tolx": float("nan")},
    {"tolx": float("inf")},
    {"CMA_rankmu": 10**400},
    {"tolx": [1e-3]},
    {"popsize": 9},  # evolalloc sets it
    {"AdaptSigma": "cma.sigma_adaptation.CMAAdaptSigmaTPA"},  # a class by name: not allowed at all
])
def test_a_string_or_an_untyped_value_is_refused_naming_the_option_field(options):
    with pytest.raises(UserError) as err:
        check_optimizer_options("cma", options)
    assert err.value.field == "optimizer.options"
    assert next(iter(options)) in str(err.value)


def test_typed_allowed_options_reach_pycma():
    optimizer = get_optimizer("cma", x0=np.ones(3), sigma0=0.3, bounds=(0.1, 4.0), popsize=4, seed=0,
                              options={"CMA_active": False, "tolfun": 1e-9, "maxiter": 50, "CMA_rankmu": 1})
    assert optimizer.es.opts["CMA_active"] is False
    assert optimizer.es.opts["maxiter"] == 50
    assert optimizer.es.opts["tolfun"] == 1e-9
