"""A model file that cannot be read — a config.json field of the wrong type, a config.json that is
not JSON, a GGUF file cut short after its header, a file of garbage named .gguf — is one line on
stderr naming the file, exit status 2 and no traceback, from every command that reads it:
``model check``, ``tasks show --model`` (the tokenizer) and ``search`` on a recipe whose
``model.spec`` names it, which is refused before anything is written."""

from __future__ import annotations

import pytest

from tests.clitools import assert_refused, populated_runs_dir, run_cli, snapshot
from tests.malformed_models import MALFORMED
from tests.pipeline.test_pipeline import tiny_recipe


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_model_check_says_which_file_it_cannot_read(tmp_path, kind):
    spec, file = MALFORMED[kind](tmp_path)
    result = run_cli("model", "check", spec)
    assert_refused(result, source="model", field="", phrase=f"cannot read {file}")
    assert result.stdout == ""


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_a_command_that_reads_the_tokenizer_says_which_file_it_cannot_read(tmp_path, kind):
    spec, file = MALFORMED[kind](tmp_path)
    result = run_cli("tasks", "show", "passkey", "--model", spec)
    assert_refused(result, source="model", field="", phrase=f"cannot read {file}")


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_a_recipe_naming_a_model_file_that_cannot_be_read_is_refused_before_anything_is_written(tmp_path, kind):
    spec, file = MALFORMED[kind](tmp_path)
    recipe = tiny_recipe(tmp_path, spec)
    runs = populated_runs_dir(tmp_path)
    before = snapshot(runs)
    result = run_cli("search", recipe, "--runs-dir", runs, "--no-progress")
    assert_refused(result, source=str(recipe), field="model.spec", phrase=f"cannot read {file}")
    assert snapshot(runs) == before
