"""benchmarks/gates_search_tables.py: a searched run passes only when it beats BOTH the uniform gates and the
global gates at c, paired p < 0.05, and the study only when every seed passes."""

from __future__ import annotations

import json

import pytest

from tests.benchscripts import load_benchmark

BUDGETS = [48.0, 96.0]
N = 40
STUDY = "sgm_multikey2048_gates"


def row(at_c: float) -> dict:
    """Per-instance exact match: the first ``at_c * N`` prompts answered at c, half of them at 2c."""
    def answered(share):
        return {f"u{i}": float(i < round(share * N)) for i in range(N)}
    return {str(BUDGETS[0]): answered(at_c), str(BUDGETS[1]): answered(0.5)}


def run() -> dict:
    return {"search_fitness": 0.8, "evaluations": 300, "groups": [{"generations": 6, "reason": "no gain"}],
            "start_scores": {"uniform": 0.5}, "shipped_start": None, "expansions": {}, "search_seconds": 60.0}


def scores(at_c: dict[int, float], global_at_c: float = 0.5) -> dict:
    rows = {"uniform": row(0.4), "global-topk": row(global_at_c), "full": row(0.9)}
    runs = {}
    for seed, share in at_c.items():
        name = f"{STUDY}-best-s{seed}"
        rows[name], runs[name] = row(share), run()
    return {"budgets": BUDGETS, "scores": rows, "runs": runs, "meta": {"instances": N}}


def test_a_run_must_beat_both_the_uniform_and_the_global_gates():
    tables = load_benchmark("gates_search_tables")
    data = scores({0: 0.8, 1: 0.55})  # s1 beats uniform (0.4) by 6 prompts, ties with global (0.5) +2
    s0, s1 = (tables.test_run(data, f"{STUDY}-best-s{s}") for s in (0, 1))
    assert s0["met"] and s0["against"]["uniform"]["beats"] and s0["against"]["global-topk"]["beats"]
    assert s1["against"]["uniform"]["beats"] and not s1["against"]["global-topk"]["beats"] and not s1["met"]
    below = tables.test_run(scores({0: 0.3}), f"{STUDY}-best-s0")  # below both rows: never a pass
    assert not below["against"]["uniform"]["beats"] and not below["met"]


def test_the_study_is_met_only_when_every_seed_passes_and_the_tables_are_written(tmp_path):
    tables = load_benchmark("gates_search_tables")
    made, met = tables.study_tables(STUDY, scores({0: 0.8, 1: 0.9, 2: 0.85}))
    assert met and [r[-1] for r in made["test"]["rows"]] == ["**met**"] * 3
    assert [r[0] for r in made["means"]["rows"]] == ["best-s0", "best-s1", "best-s2", "uniform", "global-topk", "full"]
    _, met = tables.study_tables(STUDY, scores({0: 0.8, 1: 0.9, 2: 0.5}))
    assert not met

    (tmp_path / "scores").mkdir()
    (tmp_path / "data.json").write_text(json.dumps({"tables": {"headroom-grid": {"columns": [], "rows": []}}}))
    (tmp_path / "scores" / f"{STUDY}.json").write_text(json.dumps(scores({0: 0.8, 1: 0.9, 2: 0.85})))
    tables.main(tmp_path)
    written = json.loads((tmp_path / "data.json").read_text())["tables"]
    assert set(written) == {"headroom-grid", "means", "test", "search"}  # the grid's table is kept


def test_a_scores_file_without_the_tests_rows_is_refused(tmp_path):
    tables = load_benchmark("gates_search_tables")
    data = scores({0: 0.8})
    del data["scores"]["global-topk"]
    with pytest.raises(SystemExit, match="global-topk"):
        tables.study_tables(STUDY, data)
