"""``make_evaluator``: the evaluator a recipe's ``engine`` section asks for.

``local`` builds a ``LocalEvaluator`` on the experiment's shared prefill records. ``ray`` builds a
``RayEvaluator`` on a worker pool for the split. An experiment keeps at most one live pool:
asking for another split closes the previous one first, because its workers hold the GPUs (or
CPUs) the new workers need — ``search`` then ``compare`` use the search pool, then the held-out
one. Asking again for the same split (``compare`` does, once per method) re-uses the pool, so the
held-out instances are prefilled once however many scorers are evaluated on them.
"""

from __future__ import annotations

import weakref

from evolalloc.core.errors import UserError

# experiment -> (split, pool). Weak, so a dropped experiment does not keep actors alive here.
_POOLS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def make_evaluator(experiment, split: str, scorer=None, mode: str = "generate"):
    """An ``Evaluator`` of ``split`` for ``scorer`` (default: the recipe's) on the recipe's engine.

    ``mode``: the fitness mode; only "generate" (greedy answer, the task's metric) exists so far.
    """
    if mode != "generate":
        raise UserError(f"fitness mode {mode!r} is not available in this build; use fitness.mode: generate",
                        field="fitness.mode")
    engine = experiment.recipe.engine
    scorer = scorer or experiment.scorer
    if engine.kind == "local":
        from evolalloc.engine.local import LocalEvaluator

        return LocalEvaluator(experiment.loaded, experiment.task, experiment.instances(split), scorer,
                              batch_size=engine.batch_size, records=experiment.records(split))
    if engine.kind == "ray":
        from evolalloc.engine.ray_engine import RayEvaluator

        return RayEvaluator(ray_pool(experiment, split), scorer)
    raise UserError(f"unknown engine {engine.kind!r}; engines: local, ray", field="engine.kind")


def ray_pool(experiment, split: str):
    """The experiment's worker pool for ``split``, started on first use (see the module docstring)."""
    from evolalloc.engine.ray_engine import RayWorkerPool
    from evolalloc.engine.ray_worker import WorkerSpec

    current = _POOLS.get(experiment)
    inherited_ray = False
    if current is not None:
        current_split, pool = current
        if current_split == split and not pool.closed:
            return pool
        # Keep Ray itself (starting it again costs seconds); the next pool shuts it down instead.
        inherited_ray = pool.close(keep_ray=True)
    recipe = experiment.recipe
    spec = WorkerSpec(
        model=recipe.model.spec,
        dtype=recipe.model.dtype,
        # One thread per worker unless told otherwise: workers are the unit of parallelism.
        threads=recipe.engine.threads or 1,
        task=recipe.task.name,
        task_params=dict(recipe.task.params),
        instances=[],
        scorers=list(experiment.scorers),
        question_after_compression=recipe.task.question_after_compression,
        batch_size=recipe.engine.batch_size,
    )
    pool = RayWorkerPool(spec, experiment.instances(split), recipe.engine.workers, address=recipe.engine.address)
    pool.inherit_ray(inherited_ray)
    _POOLS[experiment] = (split, pool)
    return pool
