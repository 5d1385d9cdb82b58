"""``benchmarks/gpu_check.sh`` runs end to end in its CPU mode, and its summary judges goals only on GPU figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from evolalloc.bench.gpu_report import GIB, judge, markdown

ROOT = Path(__file__).resolve().parents[2]


def test_the_gpu_check_script_runs_in_cpu_mode_and_writes_its_table(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    env.pop("OUT", None)
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--cpu", str(tmp_path)], cwd=ROOT,
                          env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr + (tmp_path / "check.log").read_text()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["bench-tiny-1k.json", "bench-tiny-512.json", "check.json", "check.log", "check.md", "env.json",
                     "exactness.xml"]
    summary = json.loads((tmp_path / "check.json").read_text())
    assert summary["env"]["mode"] == "cpu" and summary["env"]["dtype"] == "bfloat16"
    assert summary["exactness"]["passed"] and summary["exactness"]["tests"] > 0
    assert [c["settings"]["context"] for c in summary["bench"]] == [512, 1024]
    assert {g["verdict"] for g in summary["goals"]} == {"unmeasured"}  # a CPU run judges no GPU goal
    table = (tmp_path / "check.md").read_text()
    assert "| tiny-llama | 512 | 40 |" in table and "| tiny-llama | 1024 | 40 |" in table
    # The profiled cell's table rides in its JSON and in check.md (the device tool brings back 8 files at most).
    profiled = [c for c in summary["bench"] if c.get("profile")]
    assert [c["settings"]["context"] for c in profiled] == [512]
    assert "evolalloc.compress" in profiled[0]["profile"] and "evolalloc.decode" in profiled[0]["profile"]
    assert "Profile of bench-tiny-512.json" in table and "(c) floor: stock SDPA" in table


def _cell(context: int, *, device="cuda:0", truncated=False, **figures) -> dict:
    return {"shape": "llama-3.1-8b", "settings": {"context": context}, "device": device, "truncated": truncated,
            "file": f"bench-{context}.json", **figures}


def test_goals_are_judged_on_full_shape_gpu_cells_only():
    bench = [_cell(8192, cached_over_floor=1.2),
             _cell(32768, reprefill_over_cached=40.0, record_bytes_bounded=0.3 * GIB)]
    verdicts = {v["goal"]: v["verdict"] for v in judge(bench)}
    assert list(verdicts.values()) == ["met", "not met", "met"]
    cpu_or_truncated = [_cell(8192, device="cpu", cached_over_floor=1.0),
                        _cell(32768, truncated=True, reprefill_over_cached=99.0)]
    assert {v["verdict"] for v in judge(cpu_or_truncated)} == {"unmeasured"}


def test_a_missing_test_report_and_no_cells_are_said_not_hidden():
    text = markdown({}, {"ran": False}, [], judge([]))
    assert "Exactness tests: did not run" in text and "no bench cell finished" in text
    assert text.count("**unmeasured**") == 3
