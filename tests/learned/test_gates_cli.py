"""``evolalloc gates train | eval`` end to end on a tiny random Llama with the real tokenizer."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np


def evolalloc(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "evolalloc", *args], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def test_gates_train_and_eval_write_checkpoint_tables_and_the_implied_budgets(tmp_path, tiny_model_dir):
    model = ["--model", str(tiny_model_dir)]
    evolalloc("scorer", "trace", str(tmp_path / "train"), *model, "--tasks", "passkey", "--lengths", "200", "--count",
              "2")
    evolalloc("scorer", "trace", str(tmp_path / "held"), *model, "--tasks", "passkey", "--lengths", "200", "--count",
              "1",
              "--split", "heldout", "--splits-per-trace", "2")
    ckpt = tmp_path / "gates.pt"
    out = evolalloc("gates", "train", str(tmp_path / "train"), "--out", str(ckpt), "--steps", "5", "--hidden", "4",
                    "--capacities", "40,64")
    assert "1 shared projection" in out.stdout and (tmp_path / "gates.log.jsonl").is_file()
    out = evolalloc("gates", "eval", str(ckpt), "--traces", str(tmp_path / "held"), "--out", str(tmp_path / "eval"),
                    *model,
                    "--scorers", "snapkv,streaming", "--budgets", "24,48")
    assert "global-topk" in out.stdout
    result = json.loads((tmp_path / "eval" / "results.json").read_text())
    rows = result["global"]["rows"]
    assert {r["method"] for r in rows} == {"global-topk", "retention-gates", "snapkv", "streaming",
                                           "optimal (global)", "optimal (uniform)"}
    for c in (24, 48):
        at = {r["method"]: r["mean"] for r in rows if r["budget"] == c}
        assert at["optimal (global)"] <= min(at.values()) + 1e-9  # nothing beats the global oracle
        implied = np.asarray(result["global"]["implied_budgets"][str(c)])
        assert implied.shape == (4, 2) and abs(implied.sum() - c * 8) < 1e-6  # exactly c·L·H on average too
    assert (tmp_path / "eval" / "implied-budgets.png").stat().st_size > 1000


def test_gates_train_refuses_a_folder_that_is_not_a_trace_folder_in_one_line(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "index.json").write_text("{}")
    result = subprocess.run([sys.executable, "-m", "evolalloc", "gates", "train", str(tmp_path / "t")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 2 and "trace format" in result.stderr and "Traceback" not in result.stderr
