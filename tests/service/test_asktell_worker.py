"""``evolalloc worker`` on the tiny model: it serves a study with the recipe's own evaluator, and the
scores it reports are the in-process search's for the same recipe and seed."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from evolalloc.client import Client
from evolalloc.config.recipe import load_recipe
from evolalloc.pipeline.experiment import Experiment
from evolalloc.search import run_search

from .conftest import REPO, ServiceProcess, tiny_recipe_text


def run_worker(service_url: str, study_id, recipe_file, *extra: str) -> subprocess.CompletedProcess:
    """`evolalloc worker` against ``service_url``'s study, as a user runs it (a fresh process)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "evolalloc", "worker", "--service", service_url, "--study",
                           str(study_id), "--recipe", str(recipe_file), *extra],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def study_body(config, spec: str) -> dict:
    return {"name": "tiny", "model": {"spec": spec}, "target": config.target,
            "search_space": {"name": config.search_space, "group_size": config.group_size,
                             "min_budget": config.min_budget},
            "optimizer": {"name": config.optimizer, "generations": config.generations, "seed": config.seed,
                          "sigma0": config.sigma0},
            "lam": config.lam, "gamma": config.gamma, "cache_scope": config.cache_scope,
            "budget_rule": config.budget_rule}


def test_the_worker_command_finishes_a_study_with_the_local_searchs_scores(tmp_path, tiny_model_dir):
    recipe_file = tmp_path / "tiny.yaml"
    recipe_file.write_text(tiny_recipe_text(tiny_model_dir, "tiny"))
    recipe = load_recipe(recipe_file)
    with Experiment(recipe, progress=False) as experiment:
        # an ask/tell study starts at uniform (EvolKV): the service holds no model to profile a start with
        config = dataclasses.replace(experiment.search_config, start=())
        local = run_search(tmp_path / "local", experiment.search_evaluator(), config, progress=False)

    service = ServiceProcess(tmp_path / "runs", max_jobs=0).start()
    try:
        client = Client(service.url)
        study = client.create_study(study_body(config, str(tiny_model_dir)))
        done = run_worker(service.url, study["id"], recipe_file, "--client-id", "w1")
        assert done.returncode == 0, done.stderr[-3000:]
        finished = client.study(study["id"])
        assert finished["status"] == "finished" and finished["evaluations_done"] == len(local.history)
        trials = {(t["group"], t["generation"], t["candidate"]): t for t in client.study_trials(study["id"])}
        assert sorted(trials) == sorted(r.key for r in local.history)
        for record in local.history:
            trial = trials[record.key]
            assert trial["budgets"] == record.budgets
            # The worker evaluates one candidate per batch, the local loop a whole generation: float
            # sums in another order, so equal to rounding (the ranking, hence the search, is the same).
            assert trial["task_score"] == pytest.approx(record.task_score, rel=1e-6)
            assert trial["fitness"] == pytest.approx(record.fitness, rel=1e-6)
        assert finished["best"]["budgets"] == local.best_budgets.tolist()
    finally:
        service.stop()


def test_the_worker_refuses_a_recipe_for_another_model_shape(tmp_path, tiny_model_dir):
    recipe_file = tmp_path / "tiny.yaml"
    recipe_file.write_text(tiny_recipe_text(tiny_model_dir, "tiny"))
    service = ServiceProcess(tmp_path / "runs", max_jobs=0).start()
    try:
        study = Client(service.url).create_study({"geometry": {"num_layers": 6, "num_kv_heads": 2}, "target": 24})
        done = run_worker(service.url, study["id"], recipe_file)
        assert done.returncode == 2
        assert "4 layers x 2 KV heads" in done.stderr and "6 x 2" in done.stderr
        assert Client(service.url).study(study["id"])["evaluations_done"] == 0
    finally:
        service.stop()
