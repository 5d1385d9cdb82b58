"""Every Python entry point that reads a model's config or GGUF header refuses a file it cannot read
with one ``UserError`` naming the file: ``load_model``, ``model_geometry`` (the recipe's checks),
``load_tokenizer`` and ``model_card`` (``evolalloc model check``). The CLI's side: tests/cli."""

from __future__ import annotations

import pytest

from evolalloc.core.errors import UserError
from tests.malformed_models import MALFORMED, tiny_gguf


def entry_points() -> dict:
    from evolalloc.runtime.model import load_model, load_tokenizer, model_geometry
    from evolalloc.runtime.model_card import model_card

    return {"load_model": load_model, "model_geometry": model_geometry, "load_tokenizer": load_tokenizer,
            "model_card": model_card}


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """A cache of this test's own: a GGUF file that cannot be read leaves nothing converted in it."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("EVOLALLOC_CACHE", str(cache))
    return cache


@pytest.mark.parametrize("entry", ["load_model", "model_geometry", "load_tokenizer", "model_card"])
@pytest.mark.parametrize("kind", list(MALFORMED))
def test_a_model_file_that_cannot_be_read_is_one_user_error_naming_it(tmp_path, own_cache, kind, entry):
    spec, file = MALFORMED[kind](tmp_path)
    with pytest.raises(UserError) as info:
        entry_points()[entry](str(spec))
    message = str(info.value)
    assert f"cannot read {file}" in message and "\n" not in message
    assert not any(own_cache.rglob("config.json"))  # nothing converted


def test_a_wrong_type_says_which_field_and_what_it_expected(tmp_path):
    spec, _ = MALFORMED["wrong-type"](tmp_path)
    with pytest.raises(UserError, match="'num_hidden_layers' expected int, got str"):
        entry_points()["model_geometry"](str(spec))


def test_a_gguf_file_that_cannot_be_read_is_said_to_be_truncated_or_corrupt(tmp_path):
    spec, _ = MALFORMED["truncated-gguf"](tmp_path)
    with pytest.raises(UserError, match="as a GGUF file \\(truncated or corrupt\\?\\)"):
        entry_points()["model_card"](str(spec))


def test_the_whole_file_the_truncated_one_was_cut_from_is_read(tmp_path):
    """So the truncated file's refusal is the truncation's, not a file the reader never took."""
    from evolalloc.runtime.model_files import read_config

    assert read_config(gguf=tiny_gguf(tmp_path / "whole.gguf")).num_hidden_layers == 2
