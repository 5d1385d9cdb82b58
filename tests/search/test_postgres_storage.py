"""A run whose trial store is a real PostgreSQL server: created, killed, resumed, and the same as
an uninterrupted run on SQLite."""

from __future__ import annotations

import optuna

from evolalloc.core.allocation_file import load_allocation
from tests.clitools import assert_refused, run_cli, snapshot
from tests.pg_server import postgres_url  # noqa: F401 - the fixture
from tests.pipeline.test_start_faults import GSM8K_RECORDS, gsm8k_recipe


def trials(storage: str, name: str) -> list:
    from evolalloc.search.store import driver_url

    study = optuna.load_study(study_name=name, storage=driver_url(storage))
    return sorted(((t.user_attrs["group"], t.user_attrs["generation"], t.user_attrs["candidate"]), t.params, t.value)
                  for t in study.trials)


def test_a_run_on_postgresql_killed_and_resumed_equals_an_uninterrupted_run_on_sqlite(tmp_path, tiny_model_dir,
                                                                                     postgres_url, monkeypatch):
    from evolalloc.engine.local import LocalEvaluator

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    straight_recipe, _ = gsm8k_recipe(tmp_path / "a", tiny_model_dir, GSM8K_RECORDS)
    pg_recipe, _ = gsm8k_recipe(tmp_path / "b", tiny_model_dir, GSM8K_RECORDS)
    for path, storage in ((straight_recipe, None), (pg_recipe, postgres_url)):  # 2 groups x 2 generations
        text = path.read_text().replace("generations_per_group: 1", "generations_per_group: 2")
        path.write_text(text + (f"storage: {storage}\n" if storage else ""))

    straight = run_cli("search", straight_recipe, "--runs-dir", tmp_path / "straight", "--no-progress")
    assert straight.code == 0, straight.stderr

    real_evaluate, calls = LocalEvaluator.evaluate, {"n": 0}

    def killed_at_third_generation(self, budgets):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # what Ctrl-C does in the middle of a generation
        return real_evaluate(self, budgets)

    monkeypatch.setattr(LocalEvaluator, "evaluate", killed_at_third_generation)
    killed = run_cli("search", pg_recipe, "--runs-dir", tmp_path / "pg", "--no-progress")
    assert killed.code == 130
    run = tmp_path / "pg" / "tiny"
    # killed in the third evaluation: the start's two profiles (uniform, pyramid) and one generation of 3 are stored
    assert not (run / "study.db").exists() and len(trials(postgres_url, "tiny")) == 2 + 3
    monkeypatch.setattr(LocalEvaluator, "evaluate", real_evaluate)
    resumed = run_cli("resume", run, "--no-progress")
    assert resumed.code == 0, resumed.stderr

    assert trials(postgres_url, "tiny") == trials(f"sqlite:///{tmp_path / 'straight' / 'tiny' / 'study.db'}", "tiny")
    ours, theirs = (
        load_allocation(run / "allocation-c8.json"),
        load_allocation(tmp_path / "straight" / "tiny" / "allocation-c8.json"),
    )
    assert (ours.budgets == theirs.budgets).all()

    # The study now exists on the server: a second run of the same name is refused up front.
    runs = tmp_path / "pg2"
    assert_refused(run_cli("search", pg_recipe, "--runs-dir", runs, "--no-progress"), source=str(pg_recipe),
                   field="study_name", phrase="already exists in postgresql://evolalloc@127.0.0.1")
    assert snapshot(runs) is None
