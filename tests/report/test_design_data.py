"""benchmarks/design_data.py: the design table's cells in a data.json, recomputable from the scores kept."""

import json
import subprocess
import sys
from pathlib import Path

from evolalloc.report.stats import align, paired_test
from tests.report.test_design_table import write  # a comparison file of one task, niah

ROOT = Path(__file__).resolve().parents[2]
UIDS = [f"u{i}" for i in range(40)]


def solved(count: int, offset: int = 0) -> dict[str, float]:
    """``count`` of the 40 instances answered, starting at ``offset``."""
    return {u: float(offset <= i < offset + count) for i, u in enumerate(UIDS)}


def design_data(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "design_data.py"), *args], capture_output=True,
                          text=True)


def runs(tmp_path: Path, uniform_s2: dict | None = None) -> list[str]:
    """Three seeds' run folders, each with the same uniform row (unless ``uniform_s2`` replaces seed 2's)."""
    folders = []
    for seed, count in enumerate((30, 28, 32)):
        uniform = uniform_s2 if seed == 2 and uniform_s2 is not None else solved(10)
        write(tmp_path / f"run-s{seed}" / "comparison.json",
              {"evolved": {64.0: solved(count), 128.0: solved(36)}, "uniform": {64.0: uniform, 128.0: solved(35)}})
        folders.append(str(tmp_path / f"run-s{seed}"))
    return folders


def test_the_tables_hold_the_scores_that_recompute_every_paired_cell(tmp_path):
    folders = runs(tmp_path)
    scores = write(tmp_path / "scores.json", {"full": {64.0: solved(39), 128.0: solved(39)},
                                              "gates": {64.0: solved(12, 5), 128.0: solved(30)}})
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"tables": {"kept": {"columns": ["a"], "rows": [["1"]]}}}))
    done = design_data("--data", str(data), "--name", "toy", "--fixed", f"full={scores}:full",
                       "--fixed", f"uniform={folders[0]}:uniform", "--fixed", f"gates={scores}:gates",
                       "--searched", "evolved=" + ",".join(folders), "--margin", "0.10",
                       "--same", "uniform=" + ",".join(f"{f}:uniform" for f in folders))
    assert done.returncode == 0, done.stderr
    assert "uniform: 3 sources agree uid by uid (40 prompts per budget)" in done.stdout
    tables = json.loads(data.read_text())["tables"]
    assert tables["kept"] == {"columns": ["a"], "rows": [["1"]]}          # other tables untouched
    held = tables["held-out-toy"]
    assert held["columns"] == ["row", "c = 64", "c = 128"]
    assert [r[0] for r in held["rows"]] == ["full", "uniform", "gates", "evolved s0", "evolved s1", "evolved s2",
                                            "evolved pooled"]
    assert held["rows"][3][1].startswith("0.750 ")                       # 30 of 40
    per = held["per_instance"]
    assert set(per) == {"full", "uniform", "gates", "evolved-s0", "evolved-s1", "evolved-s2"}
    # A reviewer's recomputation from data.json alone gives the table's cell.
    test = paired_test(*align(per["evolved-s1"]["64"], per["gates"]["64"]))
    row = next(r for r in tables["paired-toy"]["rows"] if r[:2] == ["64", "evolved s1"])
    columns = tables["paired-toy"]["columns"]
    assert columns == ["c", "searched", "uniform", "gates"]               # the full cache is not a competitor
    assert row[columns.index("gates")].startswith(f"{test.diff:+.3f} [{test.low:+.3f}, {test.high:+.3f}], "
                                                  f"p {test.p_value:.3g}")
    assert row[columns.index("uniform")].endswith(" *")                   # +0.45, far above the margin
    verdicts = dict(tables["verdict-toy"]["rows"])
    assert "in 3/3 seeds" in verdicts["64"] and "goal met" in verdicts["64"]
    assert "goal not met" in verdicts["128"]


def test_a_row_that_differs_between_its_sources_is_an_error_naming_them_and_nothing_is_written(tmp_path):
    drifted = dict(solved(10))
    drifted["u3"] = 0.0
    folders = runs(tmp_path, uniform_s2=drifted)
    data = tmp_path / "data.json"
    data.write_text("{}")
    done = design_data("--data", str(data), "--name", "toy", "--fixed", f"uniform={folders[0]}:uniform",
                       "--searched", "evolved=" + ",".join(folders),
                       "--same", "uniform=" + ",".join(f"{f}:uniform" for f in folders))
    assert done.returncode == 2
    assert "disagree on 1 prompt(s) at c = 64 (first: u3)" in done.stderr and "run-s2" in done.stderr
    assert "Traceback" not in done.stderr
    assert data.read_text() == "{}"
