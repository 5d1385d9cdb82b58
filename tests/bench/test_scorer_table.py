"""benchmarks/scorer_table.py: every scorer at the same uniform budgets on one prefill, per-instance scores kept."""

from __future__ import annotations

import json

from tests.benchscripts import load_benchmark
from tests.pipeline.test_pipeline import tiny_recipe


def test_each_scorer_budget_and_mode_is_scored_on_the_same_prompts_with_the_greedy_prefix_kept(tmp_path,
                                                                                              tiny_model_dir):
    recipe = tiny_recipe(tmp_path, tiny_model_dir, task={
        "name": "continue_prose", "params": {"max_new_tokens": 6, "metric": "token_agreement"},
        "context_tokens": 120, "search": {"n": 2}, "heldout": {"n": 2}}, fitness={"mode": "fidelity"},
        budget={"target": 24, "expansions": [], "decode": {"interval": 4}})
    out = tmp_path / "scorers.json"
    assert load_benchmark("scorer_table").main([str(recipe), "--scorers", "snapkv,h2o", "--budgets", "40,56",
                                                "--modes", "generate,fidelity", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert set(data["scores"]) == {"generate", "fidelity"}
    for mode in ("generate", "fidelity"):
        assert set(data["scores"][mode]) == {"snapkv", "h2o"}
        assert {frozenset(per) for row in data["scores"][mode].values() for per in row.values()} == \
            {frozenset(data["scores"]["generate"]["snapkv"]["40.0"])}  # every cell on the same 2 prompts
    assert set(data["greedy_prefix"]) == {"generate"}  # only greedy answers have one
    prefix = data["greedy_prefix"]["generate"]["h2o"]["56.0"]
    assert len(prefix) == 2 and all(0 <= v <= 1 for v in prefix.values())
    assert all(0 < v for row in data["metrics"]["fidelity"].values() for per in row.values() for v in per.values())


def test_an_unknown_scorer_is_one_line_and_exit_2(tmp_path, tiny_model_dir, capsys):
    recipe = tiny_recipe(tmp_path, tiny_model_dir)
    assert load_benchmark("scorer_table").main([str(recipe), "--scorers", "nosuch", "--budgets", "16",
                                                "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nosuch" in err and not (tmp_path / "x.json").exists()


def test_several_checkpoints_of_one_scorer_are_several_rows_and_a_repeated_spec_is_refused(tmp_path, tiny_model_dir,
                                                                                           capsys):
    labels = load_benchmark("scorer_table").scorer_labels
    assert labels(["snapkv", "ppo-policy@/r/seed0.pt", "ppo-policy@/r/seed1.pt", "learned@/k/policy.pt"]) == \
        ["snapkv", "ppo-policy (seed0)", "ppo-policy (seed1)", "learned"]
    recipe = tiny_recipe(tmp_path, tiny_model_dir)
    assert load_benchmark("scorer_table").main([str(recipe), "--scorers", "h2o,snapkv,h2o", "--budgets", "16",
                                                "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'h2o' twice" in err and not (tmp_path / "x.json").exists()


def test_a_second_call_reads_back_the_finished_scorers_and_refuses_a_file_of_another_setting(tmp_path, tiny_model_dir,
                                                                                            capsys):
    recipe = tiny_recipe(tmp_path, tiny_model_dir)
    out, table = tmp_path / "scorers.json", load_benchmark("scorer_table")
    assert table.main([str(recipe), "--scorers", "snapkv", "--budgets", "40", "--out", str(out)]) == 0
    first = json.loads(out.read_text())["scores"]["generate"]["snapkv"]
    capsys.readouterr()
    assert table.main([str(recipe), "--scorers", "snapkv,h2o", "--budgets", "40", "--out", str(out)]) == 0
    assert "1 scorer(s) read back" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["scores"]["generate"]["snapkv"] == first and set(data["scores"]["generate"]) == {"snapkv", "h2o"}
    assert data["scorers"] == ["snapkv", "h2o"] and not out.with_name("scorers.json.part").exists()
    assert table.main([str(recipe), "--scorers", "h2o", "--budgets", "48", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(out) in err and "budgets" in err
    assert json.loads(out.read_text()) == data  # not overwritten
    crafted = {**data, "scorers": ["snapkv", "learned@/a/policy.pt"]}  # a row "learned" made by another file
    out.write_text(json.dumps(crafted))
    assert table.main([str(recipe), "--scorers", "learned@/b/policy.pt", "--budgets", "40", "--out", str(out)]) == 2
    assert "made by 'learned@/a/policy.pt'" in capsys.readouterr().err
