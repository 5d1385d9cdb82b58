"""benchmarks/arms_data.py: searched arms pooled over seeds, paired with the reference, and the decision."""

from __future__ import annotations

import json
from pathlib import Path

from evolalloc.report.comparison import save_comparison
from tests.benchscripts import load_benchmark

arms_data = load_benchmark("arms_data")

N = 40
UIDS = [f"t/search/4096/s77/{i}" for i in range(N)]


def scores_file(tmp_path: Path, task: str, levels: dict[str, dict[float, float]]) -> Path:
    """A search_split_scores.py-like file: run label -> budget -> a 0/1 score per prompt, the
    first ``level * N`` prompts right (so a higher level is better on the same prompts)."""
    scores = {label: {budget: {uid: float(i < round(level * N)) for i, uid in enumerate(UIDS)}
                      for budget, level in per_budget.items()}
              for label, per_budget in levels.items()}
    return save_comparison([], tmp_path / f"{task}.json", scores={task: scores})


def three_seeds(**arms: dict[float, float]) -> dict[str, dict[float, float]]:
    return {f"{run}-s{seed}": per_budget for run, per_budget in arms.items() for seed in range(3)}


def run(tmp_path, files, *extra) -> tuple[int, dict]:
    data = tmp_path / "data.json"
    argv = ["--data", str(data), "--name", "item2", "--reference", "E", "--arm", "E=E@1024,E@2048",
            "--arm", "S=S2@1024,S4@2048", "--arm", "K=K@1024,K@2048", "--cost-order", "E,K,S", *extra]
    for task, path in files.items():
        argv += ["--scores", f"{task}={path}"]
    code = arms_data.main(argv)
    return code, json.loads(data.read_text()) if data.exists() else {}


def test_an_arm_far_above_the_reference_everywhere_becomes_the_default(tmp_path, capsys):
    levels = three_seeds(E={1024: 0.3, 2048: 0.5}, S2={1024: 0.7}, S4={2048: 0.9}, K={1024: 0.3, 2048: 0.5})
    code, data = run(tmp_path, {"number": scores_file(tmp_path, "number", levels)})
    assert code == 0 and capsys.readouterr().out.rstrip().endswith("default: S")
    cells = data["tables"]["item2-cells"]
    assert len(cells["rows"]) == 6  # 3 arms x 2 budgets
    assert cells["per_instance"]["number"]["S"]["2048"][UIDS[0]] == 1.0 and cells["data_kept"]
    decision = {row[0]: row for row in data["tables"]["item2-decision"]["rows"]}
    assert decision["S"][-1] == "**default**" and decision["E"][-1] == ""


def test_an_arm_better_on_average_but_significantly_worse_in_one_cell_leaves_the_reference(tmp_path, capsys):
    levels = three_seeds(E={1024: 0.6, 2048: 0.5}, S2={1024: 0.2}, S4={2048: 1.0}, K={1024: 0.6, 2048: 0.5})
    code, data = run(tmp_path, {"number": scores_file(tmp_path, "number", levels)})
    assert code == 0 and capsys.readouterr().out.rstrip().endswith("default: E")
    decision = {row[0]: row for row in data["tables"]["item2-decision"]["rows"]}
    assert decision["S"][3] == "1" and decision["E"][-1] == "**default**"


def test_arms_tied_within_the_margin_go_to_the_cheaper_one(tmp_path, capsys):
    levels = three_seeds(E={1024: 0.3, 2048: 0.5}, S2={1024: 0.7}, S4={2048: 0.9}, K={1024: 0.7, 2048: 0.875})
    code, _ = run(tmp_path, {"number": scores_file(tmp_path, "number", levels)})
    assert code == 0 and capsys.readouterr().out.rstrip().endswith("default: K")  # K 0.7875 vs S 0.8: within 0.03


def test_seeds_are_pooled_per_prompt_and_tasks_are_cells_of_one_decision(tmp_path, capsys):
    number = three_seeds(E={1024: 0.5, 2048: 0.5}, S2={1024: 0.5}, S4={2048: 0.5}, K={1024: 0.5, 2048: 0.5})
    number["K-s2"] = {1024: 0.5, 2048: 0.8}  # one seed of K better at 2048: the pooled prompt scores average it
    other = three_seeds(E={1024: 0.5, 2048: 0.5}, S2={1024: 0.5}, S4={2048: 0.5}, K={1024: 0.5, 2048: 0.5})
    code, data = run(tmp_path, {"number": scores_file(tmp_path, "number", number),
                                "multikey": scores_file(tmp_path, "multikey", other)})
    assert code == 0
    pooled = data["tables"]["item2-cells"]["per_instance"]["number"]["K"]["2048"]
    assert pooled[UIDS[25]] == 1 / 3 and pooled[UIDS[0]] == 1.0 and pooled[UIDS[35]] == 0.0
    assert len(data["tables"]["item2-cells"]["rows"]) == 12  # 2 tasks x 2 budgets x 3 arms
    assert capsys.readouterr().out.rstrip().endswith("default: E")  # K's 0.025 over E is under the margin


def test_a_missing_seed_is_one_line_naming_the_file(tmp_path, capsys):
    levels = three_seeds(E={1024: 0.3, 2048: 0.5}, S2={1024: 0.7}, S4={2048: 0.9}, K={1024: 0.3, 2048: 0.5})
    del levels["K-s1"]
    path = scores_file(tmp_path, "number", levels)
    code, data = run(tmp_path, {"number": path})
    err = capsys.readouterr().err
    assert code == 2 and "no scores for K-s1 at 1024" in err and str(path) in err and len(err.splitlines()) == 1
    assert data == {}
