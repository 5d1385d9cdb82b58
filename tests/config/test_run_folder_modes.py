"""Run-folder files follow the umask, so a team sharing a runs directory can read each other's runs."""

from __future__ import annotations

import os
import stat

import pytest

from tests.clitools import run_cli
from tests.pipeline.test_start_faults import GSM8K_RECORDS, gsm8k_recipe


@pytest.fixture
def umask():
    previous = os.umask(0o022)
    os.umask(previous)

    def set_umask(value: int) -> None:
        os.umask(value)

    yield set_umask
    os.umask(previous)


@pytest.mark.parametrize("mask", [0o022, 0o002])
def test_every_file_of_a_run_folder_gets_the_umask_mode(tmp_path, tiny_model_dir, umask, mask):
    recipe, _ = gsm8k_recipe(tmp_path, tiny_model_dir, GSM8K_RECORDS)
    umask(mask)
    result = run_cli("search", recipe, "--runs-dir", tmp_path / "runs", "--no-progress")
    assert result.code == 0, result.stderr
    run = tmp_path / "runs" / "tiny"
    modes = {p.relative_to(run).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in [run, *run.rglob("*")]}
    assert {"recipe.yaml", "study.db", "search_checkpoint.json", "allocation-c8.json", "report.md"} <= set(modes)
    expected = {name: (0o777 if (run / name).is_dir() else 0o666) & ~mask for name in modes}
    assert {name: oct(mode) for name, mode in modes.items()} == {name: oct(mode) for name, mode in expected.items()}
