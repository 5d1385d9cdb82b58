"""benchmarks/fidelity_proxies.py: every fidelity mode and the greedy answer on one set of profiles (search split),
resumed from its file, and the report's choice of a mode."""

from __future__ import annotations

import json

import pytest

from fitness.task import FIDELITY_MODES
from tests.benchscripts import load_benchmark
from tests.pipeline.test_pipeline import tiny_recipe


def test_random_profiles_hold_the_target_exactly_and_never_go_below_the_floor():
    proxies = load_benchmark("fidelity_proxies")
    for name, budgets in proxies.random_profiles((6, 2), 40.0, 20, 0.9, 3, floor=16).items():
        assert budgets.shape == (6, 2) and budgets.min() >= 16 and budgets.sum() == 40 * 6 * 2, name
        assert (budgets[:, 0] == budgets[:, 1]).all()  # every head of a layer alike


@pytest.fixture
def recipe(tmp_path, tiny_model_dir):
    return tiny_recipe(tmp_path, tiny_model_dir, task={
        "name": "continue_prose", "params": {"max_new_tokens": 6, "metric": "token_agreement"},
        "context_tokens": 120, "search": {"n": 2}, "heldout": {"n": 2}}, fitness={"mode": "fidelity"},
        scorer={"name": "snapkv", "params": {"window": 4}},
        budget={"target": 24, "expansions": [], "decode": {"interval": 4}})


def test_every_profile_is_scored_in_every_mode_on_the_same_prompts_and_a_second_call_resumes(recipe, tmp_path,
                                                                                              capsys):
    proxies = load_benchmark("fidelity_proxies")
    out = tmp_path / "proxies.json"
    args = [str(recipe), "--per-run", "0", "--random", "2", "--chunk", "2", "--out", str(out)]
    assert proxies.main(args) == 0
    rows = json.loads(out.read_text())["profiles"]
    assert list(rows) == ["uniform", "pyramid", "random-0", "random-1"]
    for row in rows.values():
        assert set(row) == {"budgets", *FIDELITY_MODES, "generate", "likelihood_kept"}
        assert {frozenset(row[m]) for m in (*FIDELITY_MODES, "generate")} == {frozenset(rows["uniform"]["generate"])}
        assert all(0 <= v <= 1 for m in FIDELITY_MODES for v in row[m].values())
    capsys.readouterr()
    assert proxies.main(args) == 0 and "this shard scores 0" in capsys.readouterr().out
    assert proxies.main([*args[:-2], "--seed", "9", "--out", str(out)]) == 2  # another setting: refused


def test_the_report_chooses_the_mode_whose_ranking_follows_the_greedy_agreement(tmp_path):
    proxies = load_benchmark("fidelity_proxies")
    agreement = {"uniform": 0.2, "pyramid": 0.5, "searched": 0.8}
    follows = {"uniform": 0.90, "pyramid": 0.95, "searched": 0.99}
    reverses = {"uniform": 0.99, "pyramid": 0.95, "searched": 0.90}
    scores = {mode: follows if mode == "fidelity-tokens" else reverses for mode in FIDELITY_MODES}
    rows = {name: {"generate": {"u": agreement[name]}, **{mode: {"u": scores[mode][name]} for mode in FIDELITY_MODES}}
            for name in agreement}
    shard = tmp_path / "shard.json"
    shard.write_text(json.dumps({"profiles": rows}))
    summary = proxies.report([shard])
    assert summary["modes"]["fidelity-tokens"]["spearman"] == pytest.approx(1.0)
    assert summary["modes"]["fidelity"]["spearman"] == pytest.approx(-1.0)
    assert summary["modes"]["fidelity-tokens"]["top_pick"] == "searched"
    tables = proxies.page_tables(summary, shipped=["searched"])
    assert tables["fp-choice"]["chosen"] == "fidelity-tokens"
    assert [row[-1] for row in tables["fp-choice"]["rows"]] == ["", "**yes**", "", ""]
    assert [row[:2] for row in tables["fp-named"]["rows"]] == [["uniform", "0.200"], ["pyramid", "0.500"],
                                                               ["searched", "0.800"]]


def test_a_missing_or_foreign_shard_and_a_bad_shard_option_are_one_line_and_exit_2(recipe, tmp_path, capsys):
    proxies = load_benchmark("fidelity_proxies")
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"rows": []}))
    for path in (tmp_path / "missing.json", foreign):
        assert proxies.main(["--report", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(path) in err
    assert proxies.main([str(recipe), "--shard", "2/2", "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--shard" in err and not (tmp_path / "x.json").exists()
