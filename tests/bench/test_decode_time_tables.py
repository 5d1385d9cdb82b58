"""benchmarks/decode_time_tables.py: the decode-time study's held-out scores become its test, means and
scorer tables, and the pre-registered verdict (likelihood kept >= 0.95 and +0.10 agreement over uniform)."""

from __future__ import annotations

import json

from tests.benchscripts import load_benchmark

N = 40
UIDS = [f"continue_prose/heldout/{i}" for i in range(N)]
BUDGETS = [160.0, 240.0]


def per_prompt(level: float, spread: float = 0.05) -> dict[str, float]:
    """A score per prompt around ``level`` (alternately above and below it, so tests have variance)."""
    return {uid: level + (spread if i % 2 else -spread) * (i % 5) / 4 for i, uid in enumerate(UIDS)}


def study(page, agreement: dict[str, float], kept: dict[str, float]) -> None:
    """A ``compare_once`` file: each row's agreement level and likelihood kept, the same at every budget."""
    runs = [row for row in agreement if row.startswith("dt-")]
    data = {"budgets": BUDGETS,
            "scores": {row: {str(b): per_prompt(level) for b in BUDGETS} for row, level in agreement.items()},
            "runs": {run: {"seed": int(run[-1])} for run in runs},
            "metrics_by_mode": {"fidelity": {row: {str(b): per_prompt(level, 0.01) for b in BUDGETS}
                                             for row, level in kept.items()}},
            "greedy_prefix_by_mode": {"generate": {row: {str(b): per_prompt(level / 2) for b in BUDGETS}
                                                   for row, level in agreement.items()}}}
    (page / "scores").mkdir(parents=True, exist_ok=True)
    (page / "scores" / "decode_prose.json").write_text(json.dumps(data))


def tables(page) -> dict:
    return json.loads((page / "data.json").read_text())["tables"]


def test_every_seed_passing_both_parts_meets_the_goal_and_the_pages_other_tables_are_kept(tmp_path):
    study(tmp_path, {"dt-best-s0": 0.72, "dt-best-s1": 0.75, "dt-best-s2": 0.70, "uniform": 0.57, "full": 0.91},
          {"dt-best-s0": 0.97, "dt-best-s1": 0.96, "dt-best-s2": 0.955, "uniform": 0.93, "full": 1.0})
    (tmp_path / "data.json").write_text(json.dumps({"tables": {"ppo-reward": {"columns": ["a"], "rows": [["1"]]}}}))
    assert load_benchmark("decode_time_tables").main([str(tmp_path)]) == 0
    made = tables(tmp_path)
    assert set(made) == {"ppo-reward", "dt-test", "dt-means"}
    rows = {row[0]: row for row in made["dt-test"]["rows"]}
    assert rows["dt-best-s1"][1:4] == ["0.960", "yes", "+0.180"] and rows["dt-best-s1"][5:] == ["yes", "**met**"]
    assert "The goal (both, every seed): **met**" in made["dt-test"]["note"]
    means = {row[0]: row for row in made["dt-means"]["rows"]}
    assert list(means) == ["dt-best-s0", "dt-best-s1", "dt-best-s2", "uniform", "full"]
    assert means["uniform"][1].startswith("0.570 [") and means["uniform"][3:] == ["0.930", "0.930", "0.285", "0.285"]
    assert made["dt-means"]["columns"][-1] == "greedy prefix, c = 240"


def test_one_seed_below_the_likelihood_bar_or_the_margin_fails_the_goal(tmp_path):
    study(tmp_path, {"dt-best-s0": 0.72, "dt-best-s1": 0.75, "dt-best-s2": 0.65, "uniform": 0.57},
          {"dt-best-s0": 0.94, "dt-best-s1": 0.96, "dt-best-s2": 0.97, "uniform": 0.93})
    assert load_benchmark("decode_time_tables").main([str(tmp_path)]) == 0
    made = tables(tmp_path)["dt-test"]
    rows = {row[0]: row for row in made["rows"]}
    assert rows["dt-best-s0"][2] == "no" and rows["dt-best-s0"][5] == "yes" and rows["dt-best-s0"][6] == "not met"
    assert rows["dt-best-s2"][2] == "yes" and rows["dt-best-s2"][3] == "+0.080" and rows["dt-best-s2"][5] == "no"
    assert rows["dt-best-s1"][6] == "**met**" and "The goal (both, every seed): not met" in made["note"]


def test_the_scorer_table_pairs_every_scorer_with_snapkv(tmp_path):
    study(tmp_path, {"dt-best-s0": 0.72, "uniform": 0.57}, {"dt-best-s0": 0.97, "uniform": 0.93})
    scores = {"generate": {"snapkv": {"96.0": per_prompt(0.55), "160.0": per_prompt(0.57)},
                           "h2o": {"96.0": per_prompt(0.45), "160.0": per_prompt(0.57)}},
              "fidelity": {}}
    metrics = {"fidelity": {"snapkv": {"96.0": per_prompt(0.9), "160.0": per_prompt(0.93)}}}
    (tmp_path / "scores" / "scorers.json").write_text(json.dumps({"budgets": [96, 160], "scores": scores,
                                                                  "metrics": metrics}))
    assert load_benchmark("decode_time_tables").main([str(tmp_path)]) == 0
    snapkv, h2o = tables(tmp_path)["dt-scorers"]["rows"]
    assert snapkv == ["snapkv", "0.550", "0.900", "0.570", "0.930", "–", "–"]
    assert h2o[:5] == ["h2o", "0.450", "–", "0.570", "–"]
    assert h2o[5].startswith("-0.100 (p ") and h2o[6] == "+0.000 (p 1.000)"


def test_a_study_file_without_the_uniform_row_names_the_file_and_field_and_writes_nothing(tmp_path, capsys):
    study(tmp_path, {"dt-best-s0": 0.72}, {"dt-best-s0": 0.97})
    assert load_benchmark("decode_time_tables").main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.endswith("decode_prose.json: no field scores.uniform")
    assert not (tmp_path / "data.json").exists()


def test_no_study_file_and_a_file_that_is_not_json_are_one_line_each(tmp_path, capsys):
    tool = load_benchmark("decode_time_tables")
    assert tool.main([str(tmp_path)]) == 2
    assert "decode_prose.json: no such file" in capsys.readouterr().err
    (tmp_path / "scores").mkdir()
    (tmp_path / "scores" / "decode_prose.json").write_text("{not json")
    assert tool.main([str(tmp_path)]) == 2
    assert "decode_prose.json: not JSON" in capsys.readouterr().err
    assert not (tmp_path / "data.json").exists()


def test_a_task_with_answers_is_tested_on_its_agreement_with_the_full_cache_and_shows_its_own_metric(tmp_path):
    """``--compare-modes agreement,fidelity``: test 2 reads ``scores`` (the agreement with the full cache's
    continuation), never the task's own score of the answers (which here would fail the margin); the means
    table adds the task metric's columns and the agreement mode's greedy prefix."""
    agreement = {"rh-best-s0": 0.70, "rh-best-s1": 0.72, "rh-best-s2": 0.74, "uniform": 0.50, "full": 0.95}
    own = {"rh-best-s0": 0.30, "rh-best-s1": 0.31, "rh-best-s2": 0.32, "uniform": 0.29, "full": 0.60}
    runs = [row for row in agreement if row.startswith("rh-")]
    data = {"budgets": BUDGETS, "modes": ["agreement", "fidelity"],
            "scores": {row: {str(b): per_prompt(level) for b in BUDGETS} for row, level in agreement.items()},
            "runs": {run: {"seed": int(run[-1])} for run in runs},
            "metrics_by_mode": {"fidelity": {row: {str(b): per_prompt(0.97, 0.01) for b in BUDGETS} for row in own},
                                "agreement": {row: {str(b): per_prompt(level) for b in BUDGETS}
                                              for row, level in own.items()}},
            "greedy_prefix_by_mode": {"agreement": {row: {str(b): per_prompt(level / 2) for b in BUDGETS}
                                                    for row, level in agreement.items()}}}
    (tmp_path / "scores").mkdir()
    (tmp_path / "scores" / "repeat_heads.json").write_text(json.dumps(data))
    assert load_benchmark("decode_time_tables").main([str(tmp_path), "--study", "repeat_heads"]) == 0
    made = tables(tmp_path)
    rows = {row[0]: row for row in made["dt-test"]["rows"]}
    assert rows["rh-best-s0"][3] == "+0.200" and rows["rh-best-s0"][6] == "**met**"
    assert "scores/repeat_heads.json" in made["dt-test"]["note"] and "**met**" in made["dt-test"]["note"]
    means = {row[0]: row for row in made["dt-means"]["rows"]}
    assert made["dt-means"]["columns"][-2:] == ["task metric, c = 160", "task metric, c = 240"]
    assert means["uniform"][1].startswith("0.500 [") and means["uniform"][-4:] == ["0.250", "0.250", "0.290", "0.290"]
