"""The snippets of docs/shipping.md work as written: its `evolalloc export` commands run on profiles
of the bundled model's shape, then its Python blocks run (TensorRT-LLM and kvpress ones are run
elsewhere: kvpress by benchmarks/kvpress_agreement.sh, TensorRT-LLM needs a GPU)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "shipping.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    """A folder with runs/{passkey_snapkv,trt,heads}/allocation-c128.json for the bundled model's shape."""
    from transformers import AutoConfig

    from evolalloc.core.allocation import Allocation
    from evolalloc.core.allocation_file import save_allocation
    from evolalloc.runtime.model import DEFAULT_MODEL, geometry_of, resolve_model_folder

    geometry = geometry_of(AutoConfig.from_pretrained(resolve_model_folder(DEFAULT_MODEL)))
    layers = np.linspace(200, 60, geometry.num_layers).round().astype(int)

    def evolved(**kw):
        return Allocation(model=DEFAULT_MODEL, geometry=geometry, target=128, provenance={"method": "evolved"}, **kw)

    save_allocation(evolved(budgets=np.repeat(layers[:, None], 3, axis=1), scorer="snapkv").complete(),
                    tmp_path / "runs/passkey_snapkv/allocation-c128.json")
    save_allocation(evolved(budgets=np.repeat(layers[:, None], 3, axis=1), scorer="window").complete(),
                    tmp_path / "runs/trt/allocation-c128.json")
    heads = np.stack([layers, layers // 2 + 40, layers + 20], axis=1)
    save_allocation(evolved(budgets=heads, granularity="head").complete(), tmp_path / "runs/heads/allocation-c128.json")
    monkeypatch.chdir(tmp_path)
    for block in blocks("bash"):
        for line in block.splitlines():
            if line.startswith("evolalloc export"):
                out = subprocess.run([sys.executable, "-m", "evolalloc", *shlex.split(line)[1:]], capture_output=True,
                                     text=True,
                                     env={**os.environ, "PYTHONPATH": str(DOC.parents[1]), "OMP_NUM_THREADS": "1"})
                assert out.returncode == 0, (line, out.stderr)
    return tmp_path


def test_the_export_snippets_run_as_written(workdir):
    runnable = [b for b in blocks("python") if "kvpress" not in b and "tensorrt_llm" not in b and "load_model" not in b
                and "loaded." not in b]
    assert len(runnable) == 2  # curve, headkv
    for block in runnable:
        exec(compile(block, str(DOC), "exec"), {})
    assert (workdir / "lukv-curve.npy").is_file() and (workdir / "allocation-c128.trtllm.json").is_file()


@pytest.mark.real_model
def test_the_generation_snippets_run_as_written(workdir, capsys):
    namespace: dict = {}
    for block in [b for b in blocks("python") if "loaded" in b]:
        exec(compile(block, str(DOC), "exec"), namespace)
    printed = capsys.readouterr().out
    assert printed.count("71432") == 2 and "bytes; budgets above the prompt's" in printed
