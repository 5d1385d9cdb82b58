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
    line = next(row for row in out.splitlines() if "c =   128" in row)
    assert "A 0.750" in line and "B 0.000" in line and "A - B +0.750" in line and "(n = 20)" in line


def test_versus_refuses_runs_scored_on_different_instances(tmp_path):
    a = write_run(tmp_path / "a", {"x": 1.0}, {"x": 0.0})
    b = write_run(tmp_path / "b", {"y": 1.0}, {"y": 0.0})
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "versus.py"), str(a), str(b)], capture_output=True,
                          text=True)
    assert done.returncode == 2 and "different instances" in done.stderr and "Traceback" not in done.stderr


def run_versus(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "versus.py"), *map(str, args)],
                          capture_output=True, text=True)


def test_versus_pools_the_seeds_of_both_sides_before_pairing_instances(tmp_path):
    uids = [f"u{i}" for i in range(40)]
    # A's seeds: 1 on every instance, and 1 on the even ones; pooled 1.0 / 0.5 alternating, mean 0.75.
    a = [write_run(tmp_path / "a0", {u: 1.0 for u in uids}, {u: 0.0 for u in uids}),
         write_run(tmp_path / "a1", {u: float(i % 2 == 0) for i, u in enumerate(uids)}, {u: 0.0 for u in uids})]
    # B's seeds: 0 everywhere, and 1 on every fourth; pooled mean 0.125.
    b = [write_run(tmp_path / "b0", {u: 0.0 for u in uids}, {u: 0.0 for u in uids}),
         write_run(tmp_path / "b1", {u: float(i % 4 == 0) for i, u in enumerate(uids)}, {u: 0.0 for u in uids})]
    done = run_versus(*a, "--versus", *b)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    pooled = next(row for row in lines if "pooled:" in row)
    assert "A 0.750" in pooled and "B 0.125" in pooled and "A - B +0.625" in pooled and "(n = 40)" in pooled
    assert pooled.endswith("A beats B")
    pairs = [row.strip() for row in lines if " vs " in row]
    assert len(pairs) == 4  # every A seed against every B seed
    a1_b1 = next(row for row in pairs if row.startswith("a1 vs b1"))
    assert "A 0.500" in a1_b1 and "B 0.250" in a1_b1 and "A - B +0.250" in a1_b1


def test_versus_says_no_clear_winner_for_a_gain_below_the_margin_or_the_other_way_round(tmp_path):
    uids = [f"u{i}" for i in range(100)]
    # A gains 0.02 on every instance: significant, but below the 3-point bar.
    a = write_run(tmp_path / "a", {u: 0.52 for u in uids}, {u: 0.0 for u in uids})
    b = write_run(tmp_path / "b", {u: 0.5 for u in uids}, {u: 0.0 for u in uids})
    out = run_versus(a, b).stdout
    assert next(row for row in out.splitlines() if "pooled:" in row).endswith("no clear winner")
    out = run_versus(b, "--versus", a, "--margin", "0.01").stdout
    assert next(row for row in out.splitlines() if "pooled:" in row).endswith("B beats A")


def test_versus_refuses_a_b_side_scored_on_other_instances_naming_the_file(tmp_path):
    a = [write_run(tmp_path / "a0", {"x": 1.0, "y": 0.0}, {"x": 0.0, "y": 0.0}),
         write_run(tmp_path / "a1", {"x": 1.0, "y": 1.0}, {"x": 0.0, "y": 0.0})]
    b = [write_run(tmp_path / "b0", {"x": 0.0, "y": 0.0}, {"x": 0.0, "y": 0.0}),
         write_run(tmp_path / "b1", {"x": 0.0, "z": 0.0}, {"x": 0.0, "z": 0.0})]
    done = run_versus(*a, "--versus", *b)
    assert done.returncode == 2 and "different instances" in done.stderr
    assert "b1" in done.stderr and "Traceback" not in done.stderr


def test_versus_refuses_a_method_the_runs_did_not_score(tmp_path):
    a = write_run(tmp_path / "a", {"x": 1.0}, {"x": 0.0})
    b = write_run(tmp_path / "b", {"x": 1.0}, {"x": 0.0})
    done = run_versus(a, b, "--method", "lukv")
    assert done.returncode == 2 and "no method 'lukv'" in done.stderr and "uniform" in done.stderr
