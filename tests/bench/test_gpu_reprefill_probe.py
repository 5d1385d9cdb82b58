"""``benchmarks/gpu_reprefill_probe.py`` runs on a CPU at a tiny shape (its side-by-side mode swaps the decode
step's route and puts it back), and ``benchmarks/gpu_check_tables.py`` turns its lines into the page's table."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _probe(out: Path, *extra: str) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_reprefill_probe.py"), "--shape",
                           "tiny-llama", "--device", "cpu", "--context", "256", "--budget", "40", "--new-tokens", "4",
                           "--out", str(out), *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in (out / "probe.jsonl").read_text().splitlines()]


def test_the_side_by_side_probe_times_both_routes_and_its_table_is_built(tmp_path):
    run = tmp_path / "run5-unmasked-side-by-side"
    lines = _probe(run, "--side-by-side", "--no-profile", "--batch-sizes", "2", "4")
    steps = [(line["step"], line.get("route")) for line in lines]
    assert steps == [("model", None), ("prefill", None), ("prefill", None), ("generate-whole", "fix"),
                     ("generate-one-row", "fix"), ("generate-whole", "old"), ("generate-one-row", "old"),
                     ("reprefill-as-bench", None), ("batch-size", None), ("batch-size", None)]
    assert all(line["seconds"] > 0 for line in lines if "seconds" in line)
    assert not (run / "profile.txt").exists()

    shutil.copytree(ROOT / "results" / "gpu-check" / "run1-old-attention", tmp_path / "run1-old-attention")
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check_tables.py"), str(tmp_path)], check=True,
                   cwd=ROOT, timeout=60)
    tables = json.loads((tmp_path / "data.json").read_text())["tables"]
    probes = tables["probes"]["rows"]
    assert [row[1] for row in probes] == ["generate-whole", "generate-one-row", "generate-whole", "generate-one-row",
                                          "reprefill-as-bench", "batch-size", "batch-size"]
    assert probes[0][2] == "cuDNN-free (decode_step_on_gpu)" and probes[2][2] == "SDPA's choice (cuDNN)"
    assert probes[4][2] == "cuDNN-free (decode_step_on_gpu)"  # (b) in a side-by-side run ran with the fix
    assert len(tables["cells"]["rows"]) == 2  # run 1's two bench cells


def test_the_default_probe_writes_its_profile(tmp_path):
    lines = _probe(tmp_path, "--batch-sizes")
    assert [line["step"] for line in lines][3:] == ["generate-whole", "generate-bounded", "generate-whole",
                                                     "generate-bounded", "reprefill-as-bench", "profiled"]
    assert "by CPU total" in (tmp_path / "profile.txt").read_text()
