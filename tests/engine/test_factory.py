"""``Experiment.evaluator`` uses the engine the recipe names; the experiment owns and closes it; a Ray
engine keeps one live pool."""

from __future__ import annotations

import pytest

from evolalloc.config.recipe import recipe_from_dict
from evolalloc.engine.local import LocalEvaluator
from evolalloc.pipeline.experiment import Experiment
from tests.engine.conftest import CONTEXT_TOKENS, allocations


def recipe(model_dir, **engine):
    return recipe_from_dict({
        "model": {"spec": str(model_dir)},
        "task": {"name": "passkey", "context_tokens": CONTEXT_TOKENS, "search": {"n": 2}, "heldout": {"n": 1}},
        "scorer": {"name": "snapkv", "params": {"window": 8}},
        "budget": {"target": 24},
        "engine": {"threads": 1, "batch_size": 8, **engine},
    })


def scores(results):
    return [(r.task_score, [(o.uid, o.prediction) for o in r.instances]) for r in results]


def test_the_local_engine_is_the_default_and_needs_no_ray(tiny_model_dir):
    with Experiment(recipe(tiny_model_dir), progress=False) as experiment:
        evaluator = experiment.evaluator("search")
        assert isinstance(evaluator, LocalEvaluator)
        engine = experiment.engine
    assert engine.closed
    with pytest.raises(RuntimeError, match="closed"):
        engine.evaluator("search", experiment.scorer)


def test_an_unknown_engine_option_is_refused_by_name_when_the_recipe_is_read(tiny_model_dir):
    from evolalloc.core.errors import UserError

    with pytest.raises(UserError, match="max_retires.*did you mean 'max_retries'"):
        recipe(tiny_model_dir, kind="ray", options={"max_retires": 1})
    with pytest.raises(UserError, match="engine.options.retries"):
        recipe(tiny_model_dir, options={"retries": 1})


def test_a_ray_recipe_evaluates_on_workers_reusing_a_split_pool_and_replacing_it_for_another_split(ray_session,
                                                                                                   tiny_model_dir):
    from evolalloc.engine.ray_engine import RayEvaluator

    local = Experiment(recipe(tiny_model_dir), progress=False)
    # One worker keeps this test cheap; sharding across workers is tested in test_ray_engine.py.
    remote = Experiment(recipe(tiny_model_dir, kind="ray", workers=1, options={"max_retries": 1}), progress=False)
    search = remote.evaluator("search")
    assert isinstance(search, RayEvaluator) and len(search.pool.actors) == 1
    assert search.pool.max_retries == 1  # engine.options reach the engine
    assert scores(search.evaluate(allocations())) == scores(local.evaluator("search").evaluate(allocations()))
    # compare asks once per method: same split, same workers, another scorer's ranking.
    streaming = remote.scorer_for(remote.baseline("streaming", 24))
    assert remote.evaluator("search", streaming).pool is search.pool
    # Another split frees the search workers first (on a GPU cluster they hold the GPUs).
    heldout = remote.evaluator("heldout")
    assert search.pool.closed and not heldout.pool.closed
    [result] = heldout.evaluate(allocations()[:1])
    assert result.ok and len(result.instances) == 1
    with pytest.raises(RuntimeError, match="closed"):
        search.evaluate(allocations()[:1])
    remote.close()  # the experiment owns the engine: closing it stops the last pool
    assert heldout.pool.closed
