"""runs/your_data.yaml, the bring-your-own-data recipe, runs end to end as written (its shipped
examples/qa.jsonl), with only the model swapped for the tiny random one and the search shortened."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clitools import run_cli

REPO = Path(__file__).resolve().parents[2]


def test_the_your_data_recipe_searches_ships_and_compares_on_the_example_file(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.chdir(REPO)  # the recipe's path is relative to the folder evolalloc runs in, as documented
    result = run_cli("search", "runs/your_data.yaml", "--runs-dir", tmp_path, "--no-progress",
                     "--set", f"model.spec={tiny_model_dir}", "--set", "search_space.group_size=2",
                     "--set", "optimizer.generations_per_group=1", "--set", "engine.threads=1")
    assert result.code == 0, result.stderr
    run = tmp_path / "your_data"
    assert (run / "allocation-c64.json").is_file() and (run / "allocation-c128.json").is_file()
    comparison = json.loads((run / "comparison.json").read_text())
    rows = {row["method"] for row in comparison["rows"]}
    assert {"evolved", "uniform", "pyramid", "streaming"} <= rows
    assert "jsonl_qa" in (run / "report.md").read_text()


def test_a_bad_line_in_your_file_stops_the_search_before_anything_is_written(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.chdir(REPO)
    bad = tmp_path / "mine.jsonl"
    good = {"context": "The door was blue.", "question": "What colour was the door?", "answers": ["blue"]}
    bad.write_text(json.dumps(good) + "\n" + json.dumps({**good, "question": ""}) + "\n", encoding="utf-8")
    result = run_cli("search", "runs/your_data.yaml", "--runs-dir", tmp_path / "runs", "--no-progress",
                     "--set", f"model.spec={tiny_model_dir}", "--set", f"task.params.path={bad}")
    assert result.code == 2 and result.error_lines == [
        f"error: runs/your_data.yaml: task: {bad}:2: field 'question': expected text, got a blank string"]
    assert not (tmp_path / "runs").exists()
