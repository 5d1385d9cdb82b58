"""A whole run on a file of prompts with no answers, on the tiny random model: the search climbs the
fidelity mode, the held-out comparison scores greedy agreement with the full cache, and the run
folder, report and profile record that mode like any other."""

from __future__ import annotations

import json

from evolalloc.core.allocation_file import load_allocation
from tests.pipeline.test_pipeline import tiny_recipe


def test_a_prompts_file_runs_search_compare_and_report_in_the_fidelity_mode(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.pipeline.run import search_run

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"Story {i}. " + "The tide came in over the "
                                           "sand and the gulls rose from the rocks. " * 8 + "Then"}) + "\n"
                               for i in range(8)), encoding="utf-8")
    task = {"name": "jsonl_prompts", "params": {"path": str(prompts), "max_new_tokens": 8},
            "search": {"n": 2}, "heldout": {"n": 4}}
    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, task=task))
    run = create_run_folder(recipe, tmp_path / "runs")
    search_run(run, recipe, progress=False)
    profile = load_allocation(run / "allocation-c24.json")
    assert profile.provenance["fitness_mode"] == "fidelity-tokens" and profile.total == 24 * 4 * 2
    comparison = json.loads((run / "comparison.json").read_text())
    assert {row["method"] for row in comparison["rows"]} == {"evolved", "uniform", "pyramid", "streaming"}
    scores = [score for per_budget in comparison["instances"]["jsonl_prompts"].values()
              for per_uid in per_budget.values() for score in per_uid.values()]
    assert len(scores) == 4 * 4 * 2 and all(0.0 <= s <= 1.0 for s in scores)  # greedy agreement, per prompt
    report = (run / "report.md").read_text()
    assert "fidelity" in report and "| evolved" in report
    assert json.loads((run / "run.json").read_text())["tasks"][0]["fitness_mode"] == "fidelity-tokens"
