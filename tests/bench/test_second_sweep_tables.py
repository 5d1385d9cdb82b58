"""benchmarks/second_sweep_tables.py: a second pass is set against its own first pass, its evaluations count
the starts, and an unfinished second pass is left out of the table."""

from __future__ import annotations

import json

from tests.benchscripts import load_benchmark


def checkpoint(folder, starts: dict[str, float], gains: list[float], evaluations: int = 13):
    """A search checkpoint with one group per gain, each group starting where the last ended."""
    best, groups = max(starts.values()), []
    for i, gain in enumerate(gains):
        groups.append({"group": i, "generations": 4, "evaluations": evaluations, "reason": "no gain",
                       "start_fitness": best, "best_fitness": best + gain, "gain": gain})
        best += gain
    folder.mkdir(parents=True)
    (folder / "search_checkpoint.json").write_text(json.dumps({"start_scores": starts, "groups": groups}))


def test_each_finished_second_pass_against_its_first(tmp_path, monkeypatch):
    script = load_benchmark("second_sweep_tables")
    monkeypatch.setattr(script, "FIRST", tmp_path / "first")
    checkpoint(tmp_path / "first" / "rpk-best-s4", {"uniform": 0.6, "lukv": 1.0}, [0.05, 0.05, 0.0, 0.05])
    checkpoint(tmp_path / "page" / "runs" / "swp-again-s4", {"s4.json": 1.15}, [0.02, 0.0, 0.01, 0.0])
    checkpoint(tmp_path / "first" / "rpk-best-s7", {"uniform": 0.6}, [0.1, 0.1, 0.1, 0.1])
    checkpoint(tmp_path / "page" / "runs" / "swp-again-s7", {"s7.json": 1.0}, [0.02])  # one group: unfinished
    assert script.main([str(tmp_path / "page")]) == 0
    rows = json.loads((tmp_path / "page" / "data.json").read_text())["tables"]["passes"]["rows"]
    assert rows == [["seed 4", "1.1500 (54)", "1.1500", "1.1800 (53)", "+0.0300",
                     "4, +0.0200 · 4, +0.0000 · 4, +0.0100 · 4, +0.0000"]]
