"""``ruff check .`` is clean over the whole repository, with the settings in pyproject.toml
(line length 120; pycodestyle, pyflakes and import order). CI installs ruff with the ``test`` extra."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ruff_command() -> list[str]:
    """The ruff next to this Python (the ``test`` extra installs it there), else one on PATH."""
    beside = Path(sys.executable).with_name("ruff")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("ruff")
    assert found, "ruff is not installed: pip install -e '.[test]'"
    return [found]


def test_ruff_finds_nothing_to_fix_in_the_repository():
    done = subprocess.run([*ruff_command(), "check", "--output-format", "concise", "--no-cache", "."],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, "ruff check . found violations:\n" + done.stdout + done.stderr
