"""`evolalloc generate`: JSONL prompt files, one-line errors naming the file and line, answers out."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from evolalloc.cli.generate import read_prompt_file
from evolalloc.core.errors import UserError


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "evolalloc", "generate", *map(str, args)], capture_output=True,
                          text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.mark.parametrize("lines, qac, message", [
    (['{"prompt": "fine"}', "{not json"], False, "line 2: not a JSON object"),
    (['["a list"]'], False, "line 1: expected a JSON object, got list"),
    (['{"text": "x"}'], False, 'line 1: needs a string field "prompt"'),
    (['{"prompt": "x"}'], True, 'line 1: --question-after-compression needs string fields "context"'),
    (['{"prompt": "   "}'], False, "line 1: empty prompt"),
    (["", "  "], False, "no prompts in the file"),
])
def test_bad_prompt_lines_are_one_error_naming_the_file_and_line(tmp_path, lines, qac, message):
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match=message) as info:
        read_prompt_file(path, qac)
    assert str(info.value).startswith(str(path))


def test_context_and_question_lines_are_joined_or_kept_apart(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"uid": "a", "context": "C.",
                                "question": " Q?"}) + "\n\n" + json.dumps({"prompt": "P"}) + "\n")
    assert read_prompt_file(path, False) == [("a", "C. Q?"), ("3", "P")]
    path.write_text(json.dumps({"uid": "a", "context": "C.", "question": " Q?"}) + "\n")
    assert read_prompt_file(path, True) == [("a", ("C.", " Q?"))]


def test_the_cli_exits_2_with_one_line_before_loading_any_model(tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "ok"}\n{"prompt": 3}\n')
    out = run_cli("--allocation", tmp_path / "missing.json", "--prompt-file", prompts)
    assert out.returncode == 2 and out.stderr == (f'error: {prompts}: line 2: needs a string '
                                                  'field "prompt" (or "context" and "question")\n')
    prompts.write_text('{"prompt": "ok"}\n')
    out = run_cli("--allocation", tmp_path / "missing.json", "--prompt-file", prompts)
    assert out.returncode == 2 and out.stderr == f"error: {tmp_path / 'missing.json'}: no such file\n"


def test_the_cli_answers_every_prompt_and_reports_the_memory_kept(tmp_path, tiny_model_dir):
    from transformers import AutoConfig

    from evolalloc.core.allocation import Allocation
    from evolalloc.core.allocation_file import save_allocation
    from evolalloc.runtime.model import geometry_of

    geometry = geometry_of(AutoConfig.from_pretrained(tiny_model_dir))
    budgets = np.full((geometry.num_layers, geometry.num_kv_heads), 12)
    # made for the tiny model, and no --model: the file's model answers (the bundled default has another shape)
    allocation = save_allocation(Allocation(model=str(tiny_model_dir), geometry=geometry, target=12, scorer="knorm",
                                            budgets=budgets, provenance={"method": "uniform"}), tmp_path / "a.json")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(json.dumps({"uid": f"u{i}", "prompt": "word " * (10 * i + 3)})
                                 for i in range(3)) + "\n")
    out = run_cli("--allocation", allocation, "--prompt-file", prompts, "--max-new-tokens", 3)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["uid"] for r in rows] == ["u0", "u1", "u2"]
    assert "clipped" in rows[0]["note"] and rows[2]["note"] == ""
    assert rows[2]["kv_bytes_kept"] < rows[2]["kv_bytes_full"]
    assert "3 prompts; KV cache kept" in out.stderr


def tiny_allocation(tmp_path, tiny_model_dir, scorer: str, **fields):
    from transformers import AutoConfig

    from evolalloc.core.allocation import Allocation
    from evolalloc.core.allocation_file import save_allocation
    from evolalloc.runtime.model import geometry_of

    geometry = geometry_of(AutoConfig.from_pretrained(tiny_model_dir))
    budgets = np.full((geometry.num_layers, geometry.num_kv_heads), 12)
    return save_allocation(Allocation(model="tiny", geometry=geometry, target=12, scorer=scorer, budgets=budgets,
                                      provenance={"method": "uniform"}, **fields), tmp_path / f"{scorer}.json")


@pytest.mark.parametrize("scorer, options, message", [
    ("knorm", ["--decode-interval", 0], "--decode-interval: decode interval must be >= 1, got 0"),
    ("random", ["--decode-interval", 4], "--decode-interval: scorer 'random' cannot rank generated tokens"),
    ("knorm", ["--decode-interval", 4, "--prompt-only"], "contradict each other"),
])
def test_a_decode_setting_that_cannot_run_exits_2_with_one_line_before_loading_any_model(tmp_path, tiny_model_dir,
                                                                                      scorer, options, message):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "ok"}\n')
    allocation = tiny_allocation(tmp_path, tiny_model_dir, scorer)
    out = run_cli("--allocation", allocation, "--prompt-file", prompts, "--model", tmp_path / "no-model", *options)
    assert out.returncode == 2 and out.stderr.startswith("error: ") and message in out.stderr
    assert out.stderr.count("\n") == 1


def test_the_cli_holds_the_budgets_of_a_held_profile_unless_told_prompt_only(tmp_path, tiny_model_dir):
    from evolalloc.core.decode_eviction import DecodeEviction

    allocation = tiny_allocation(tmp_path, tiny_model_dir, "knorm", decode=DecodeEviction(4))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "word " * 40}) + "\n")
    held = run_cli("--allocation", allocation, "--prompt-file", prompts, "--model", tiny_model_dir,
                   "--max-new-tokens", 12)
    assert held.returncode == 0, held.stderr
    assert "held while decoding (every 4 tokens)" in held.stderr
    loose = run_cli("--allocation", allocation, "--prompt-file", prompts, "--model", tiny_model_dir,
                    "--max-new-tokens", 12, "--prompt-only")
    assert loose.returncode == 0 and "prompt only" in loose.stderr
    every = run_cli("--allocation", allocation, "--prompt-file", prompts, "--model", tiny_model_dir,
                    "--max-new-tokens", 12, "--decode-interval", 2)
    assert every.returncode == 0 and "every 2 tokens" in every.stderr
