"""``evolalloc scorer trace | train | eval`` end to end on a tiny random Llama with the real tokenizer."""

from __future__ import annotations

import json
import subprocess
import sys


def evolalloc(*args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "evolalloc", *args], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def test_trace_train_and_eval_write_their_files(tmp_path, tiny_model_dir):
    model = ["--model", str(tiny_model_dir)]
    evolalloc("scorer", "trace", str(tmp_path / "train"), *model, "--tasks", "passkey", "--lengths", "200", "--count",
              "2")
    evolalloc("scorer", "trace", str(tmp_path / "held"), *model, "--tasks", "passkey", "--lengths", "200", "--count",
              "1", "--split", "heldout")
    index = json.loads((tmp_path / "train" / "index.json").read_text())
    assert len(index["traces"]) == 2 and index["geometry"]["num_kv_heads"] == 2
    ckpt = tmp_path / "policy.pt"
    evolalloc("scorer", "train", str(tmp_path / "train"), "--out", str(ckpt), "--steps", "6", "--hidden", "8",
              "--warmup", "2")
    assert ckpt.is_file() and (tmp_path / "policy.log.jsonl").is_file()
    out = evolalloc("scorer", "eval", str(ckpt), "--traces", str(tmp_path / "held"), "--out", str(tmp_path / "eval"),
                    *model,
                    "--scorers", "learned,snapkv,streaming,random", "--budgets", "48", "--seeds", "2", "--per-seed",
                    "1",
                    "--context-tokens", "200")
    assert "normalised eviction cost" in out.stdout
    result = json.loads((tmp_path / "eval" / "results.json").read_text())
    assert set(result["costs"]["normalised"]) == {"learned", "snapkv", "streaming", "random"}
    assert all(row["mean"] >= 1.0 - 1e-6 for row in result["costs"]["normalised"].values())  # nothing beats optimal
    assert result["downstream"]["scores"]["learned@48"]["n"] == 2
    assert (tmp_path / "eval" / "eviction-cost.png").stat().st_size > 1000


def test_eval_refuses_a_policy_trained_for_another_model(tmp_path, tiny_model_dir):
    from evolalloc.runtime.policy import HeadPolicies, PolicyConfig, save_policy

    geometry = {"num_layers": 4, "num_query_heads": 4, "num_kv_heads": 2, "head_dim": 16, "max_positions": 2048,
                "dtype_bytes": 4}
    ckpt = save_policy(tmp_path / "p.pt", HeadPolicies(PolicyConfig(4, 2, 16, hidden=4)),
                       model={"spec": "x", "model_type": "llama", "fingerprint": "not-this-one"}, geometry=geometry,
                       training={})
    (tmp_path / "held").mkdir()
    result = subprocess.run([sys.executable, "-m", "evolalloc", "scorer", "eval", str(ckpt), "--traces",
                             str(tmp_path / "held"),
                             "--out", str(tmp_path / "o"), "--model", str(tiny_model_dir)], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 2 and "fingerprint" in result.stderr and "Traceback" not in result.stderr
