"""Per-instance held-out scores kept in comparison.json, and benchmarks/versus.py pairing two runs."""

import subprocess
import sys
from pathlib import Path

import pytest

from evolalloc.core.errors import UserError
from evolalloc.report.comparison import compare_scores, load_instance_scores, save_comparison

ROOT = Path(__file__).resolve().parents[2]


def write_run(folder: Path, evolved: dict, uniform: dict) -> Path:
    per_method = {"evolved": {128.0: evolved}, "uniform": {128.0: uniform}}
    folder.mkdir(parents=True)
    save_comparison(compare_scores(per_method, reference="evolved"), folder / "comparison.json",
                    scores={"passkey": per_method})
    return folder


def test_per_instance_scores_round_trip(tmp_path):
    run = write_run(tmp_path / "a", {"x": 1.0, "y": 0.0}, {"x": 0.0, "y": 0.0})
    assert load_instance_scores(run / "comparison.json") == {
        "passkey": {"evolved": {128.0: {"x": 1.0, "y": 0.0}}, "uniform": {128.0: {"x": 0.0, "y": 0.0}}}}


def test_a_comparison_without_instance_scores_says_how_to_get_them(tmp_path):
    save_comparison([], tmp_path / "comparison.json")
    with pytest.raises(UserError, match="evolalloc compare"):
        load_instance_scores(tmp_path / "comparison.json")


def test_versus_pairs_two_runs_on_their_instances_and_averages_several_a_runs(tmp_path):
    uids = [f"u{i}" for i in range(20)]
    a1 = write_run(tmp_path / "s0", {u: 1.0 for u in uids}, {u: 0.0 for u in uids})
    a2 = write_run(tmp_path / "s1", {u: float(i % 2) for i, u in enumerate(uids)}, {u: 0.0 for u in uids})
    b = write_run(tmp_path / "random", {u: 0.0 for u in uids}, {u: 0.0 for u in uids})
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "versus.py"), str(a1), str(a2), "--versus", str(b)],
                         capture_output=True, text=True, check=True).stdout
    line = next(l for l in out.splitlines() if "c =   128" in l)
    assert "A 0.750" in line and "B 0.000" in line and "A - B +0.750" in line and "(n = 20)" in line


def test_versus_refuses_runs_scored_on_different_instances(tmp_path):
    a = write_run(tmp_path / "a", {"x": 1.0}, {"x": 0.0})
    b = write_run(tmp_path / "b", {"y": 1.0}, {"y": 0.0})
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "versus.py"), str(a), str(b)], capture_output=True, text=True)
    assert done.returncode == 2 and "different instances" in done.stderr and "Traceback" not in done.stderr
