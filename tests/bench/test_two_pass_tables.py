"""benchmarks/two_pass_tables.py: each run's fitness at the end of each pass, read from real checkpoints, and a
search not yet finished says how far it got instead of a figure."""

from __future__ import annotations

import json

from evolalloc.search import SearchConfig
from evolalloc.search.checkpoint import Checkpoint, save_checkpoint
from evolalloc.search.stopping import GroupSummary
from tests.benchscripts import load_benchmark

CONFIG = SearchConfig(num_layers=8, num_kv_heads=2, target=32, group_size=4, passes=2)  # 2 groups per pass


def write_run(folder, gains: list[float], start: float = 1.0) -> None:
    """A checkpoint after ``len(gains)`` groups, each of 3 generations x 13 evaluations."""
    best, groups = start, []
    for g, gain in enumerate(gains):
        groups.append(GroupSummary(g, 3, 13, "no gain", best, best + gain, pass_number=g // 2 + 1,
                                   space_group=g % 2).to_dict())
        best += gain
    folder.mkdir(parents=True)
    save_checkpoint(folder, Checkpoint(config=CONFIG, group=len(gains), groups=groups,
                                       start_scores={"uniform": start - 0.1, "lukv": start, "pyramid": None}))


def test_each_pass_ends_where_its_last_group_stopped_and_unfinished_runs_say_how_far(tmp_path):
    script = load_benchmark("two_pass_tables")
    runs = tmp_path / "runs"
    write_run(runs / "tp-best-s12", [0.05, 0.01, 0.02, 0.0])
    write_run(runs / "tp-best-s13", [0.04, 0.0, 0.01])  # pass 2's second group not finished
    write_run(runs / "tp-best-s2", [0.03])  # pass 1 under way (sorted by seed: before 12)
    (tmp_path / "data.json").write_text(json.dumps({"tables": {"dt-test": {"columns": ["a"], "rows": [["1"]]}}}))
    assert script.main([str(tmp_path)]) == 0
    tables = json.loads((tmp_path / "data.json").read_text())["tables"]
    assert set(tables) == {"dt-test", "tp-passes"}  # the test's table kept
    assert tables["tp-passes"]["rows"] == [
        ["best-s2", "1.0000", "under way: 1 of 2 groups", "–", "–"],
        ["best-s12", "1.0000", "1.0600 (29)", "1.0800 (26)", "+0.0200"],
        ["best-s13", "1.0000", "1.0400 (29)", "under way: 1 of 2 groups", "–"],
    ]
