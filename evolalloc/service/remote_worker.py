"""``evolalloc worker``: evaluate an ask/tell study's suggestions with evolalloc's own runtime.

The recipe says how to judge a profile (model, task, scorer, fitness mode, engine); the study on
the service says what to search. The worker builds the recipe's ``Experiment``, evaluates each
suggested budget array on the search split in the recipe's fitness mode (exactly what the local
search would call), and reports the task score, or a FAIL with the evaluator's error. Several
workers on several machines can serve one study; no Ray needed.
"""

from __future__ import annotations

import os
import socket
from typing import Callable

from evolalloc.core.errors import UserError


def default_client_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def check_geometry(study: dict, geometry) -> None:
    """The recipe's model must have the study's shape (``UserError`` naming both)."""
    want = study["spec"]["geometry"]
    if (want["num_layers"], want["num_kv_heads"]) != (geometry.num_layers, geometry.num_kv_heads):
        raise UserError(
            f"the recipe's model has {geometry.num_layers} layers x {geometry.num_kv_heads} KV heads, but study "
            f"{study['id']} is for {want['num_layers']} x {want['num_kv_heads']}", field="model")


def check_search_space(study: dict, recipe) -> None:
    """The recipe's search space must read the study's budgets as the study means them: a hybrid
    study's budgets are a prior an adapter applies per input (``score_prior``), and the worker's
    evaluator wraps its scorer in the adapter of the *recipe's* search space (``UserError``)."""
    from searchspaces import SEARCH_SPACES

    wanted = (study.get("config") or {}).get("search_space")
    if wanted is None:
        return
    adapter = SEARCH_SPACES.get(wanted).adapter
    mine = SEARCH_SPACES.get(recipe.search_space.name).adapter
    if adapter != mine:
        raise UserError(f"study {study.get('id')} searches {wanted!r} "
                        f"(budget adapter {adapter or 'none'}), the recipe's "
                        f"search space {recipe.search_space.name!r} has {mine or 'none'}: its scores would not be the "
                        f"study's; set search_space.name: {wanted}", field="search_space.name")
    from evolalloc.search.config import space_params_of

    theirs, ours = (study.get("config") or {}).get("space_params") or {}, space_params_of(recipe.search_space)
    if theirs != ours:  # e.g. floors_under_global_topk's floor_fraction: the same budgets, kept otherwise
        raise UserError(f"study {study.get('id')} searches {wanted!r} with {theirs or 'its defaults'}, the recipe with "
                        f"{ours or 'its defaults'}: its scores would not be the study's", field="search_space")


def scorer_identity(experiment) -> dict:
    """The recipe's scorer as the study records it: name, settings and, for a trained scorer (gates,
    learned), its checkpoint's path, sha256 and training record — what a run's profile records."""
    experiment.ensure_scorer_trained()  # scorer.train: the checkpoint exists before it is fingerprinted
    scorer = experiment.scorer
    params = {k: v for k, v in scorer.params().items() if v is None or isinstance(v, (str, int, float, bool))}
    return {"name": scorer.name, "params": params, "checkpoint": scorer.checkpoint_provenance()}


def run_worker(client, study_id: int, recipe, *, client_id: str | None = None, max_trials: int | None = None,
               echo: Callable[[str], None] = print, progress: bool = False) -> int:
    """Serve study ``study_id`` with ``recipe``'s evaluator until it ends; the trials evaluated."""
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.service.work_loop import work

    client_id = client_id or default_client_id()
    study = client.study(study_id)
    check_search_space(study, recipe)  # before any model is loaded
    with Experiment(recipe, progress=progress) as experiment:
        check_geometry(study, experiment.geometry)
        evaluator = experiment.search_evaluator()

        def evaluate(budgets):
            result = evaluator.evaluate([budgets])[0]
            if not result.ok:
                raise RuntimeError(result.error or f"non-finite task score {result.task_score!r}")
            return result.task_score

        def show(trial, reply):
            t = reply["trial"]
            echo(f"trial {trial['id']} (group {trial['group']}, generation {trial['generation']}): "
                 + (f"task {t['task_score']:.4f}, fitness {t['fitness']:.4f}" if t["state"] == "COMPLETE"
                    else f"FAIL {t['error']}") + (" (duplicate, ignored)" if reply["duplicate"] else ""))

        done = work(client, study_id, client_id, evaluate, max_trials=max_trials, on_trial=show,
                    scorer=scorer_identity(experiment))
    final = client.study(study_id)
    echo(f"worker {client_id}: {done} trial(s); study {study_id} {final['status']}, "
         f"{final['evaluations_done']}/{final['evaluations_planned']} evaluations")
    return done
