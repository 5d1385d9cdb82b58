"""benchmarks/run_table.py: a run's comparison.json becomes a page's table, with the figures its report prints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.benchscripts import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "results" / "main-job" / "converged-run" / "comparison.json"


def script():
    return load_benchmark("run_table")


def test_a_runs_comparison_becomes_a_table_beside_the_pages_other_tables(tmp_path):
    shutil.copy(RUN, tmp_path / "comparison.json")
    (tmp_path / "data.json").write_text(json.dumps({"tables": {"kept": {"columns": ["a"], "rows": [["1"]]}}}))
    script().main([str(tmp_path / "comparison.json"), str(tmp_path / "data.json"), "held-out"])
    tables = json.loads((tmp_path / "data.json").read_text())["tables"]
    assert set(tables) == {"kept", "held-out"}
    table = tables["held-out"]
    assert table["columns"] == ["c", "evolved", "uniform SnapKV", "PyramidKV", "LU-KV"]
    first = table["rows"][0]
    assert first[0] == "512" and first[1] == "**0.984 [0.95, 1.00]**"
    assert first[4] == "0.672 [0.55, 0.78]; +0.312, p < 0.001"  # evolved − LU-KV and its Wilcoxon p
    assert table["rows"][1][4].endswith("+0.094, p 0.014") and "from comparison.json" in table["note"].lower()


def test_missing_arguments_are_a_usage_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as exited:
        script().main(["only-one.json"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip().startswith("usage: python benchmarks/run_table.py COMPARISON.json")
