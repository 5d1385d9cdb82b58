"""Helpers for command-line fault tests: run the CLI entry point in-process, and snapshot a tree.

``run_cli`` goes through ``evolalloc.cli.run``, the console script's entry point, so a
``UserError`` becomes one stderr line and exit status 2 exactly as for a user; anything else
propagates as an exception and fails the test (a user would have seen a traceback).

``snapshot`` is the "nothing written" invariant: names, types, modes, modification times and
bytes of everything under a folder (``None`` when it does not exist). Directory modification
times are included, so a file written and removed again is caught too.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def run_cli(*args: str) -> CliResult:
    from evolalloc.cli import run

    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["evolalloc", *map(str, args)]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                run()
                code = 0
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        sys.argv = argv
    return CliResult(code, out.getvalue(), err.getvalue())


def snapshot(root: str | os.PathLike) -> dict | None:
    """Everything under ``root`` (and ``root`` itself), down to the bytes."""
    root = Path(root)
    if not root.exists():
        return None
    tree = {}
    for path in [root, *sorted(root.rglob("*"))]:
        info = path.lstat()
        key = path.relative_to(root).as_posix()
        if stat.S_ISLNK(info.st_mode):
            tree[key] = ("link", os.readlink(path))
        elif stat.S_ISDIR(info.st_mode):
            tree[key] = ("dir", stat.S_IMODE(info.st_mode), info.st_mtime_ns)
        else:
            tree[key] = ("file", stat.S_IMODE(info.st_mode), info.st_mtime_ns, path.read_bytes())
    return tree


def populated_runs_dir(tmp_path: Path) -> Path:
    """A runs directory that already holds someone's run, so "unchanged" has something to compare."""
    runs = tmp_path / "runs"
    (runs / "earlier").mkdir(parents=True)
    (runs / "earlier" / "recipe.yaml").write_text("name: earlier\n")
    (runs / "earlier" / "notes.txt").write_text("keep me\n")
    return runs


def assert_refused(result: CliResult, *, source: str, field: str, phrase: str = "") -> str:
    """Exit 2, exactly one stderr line naming ``source`` and ``field``; returns that line."""
    assert result.code == 2, (result.code, result.stderr)
    assert "Traceback" not in result.stderr
    assert len(result.error_lines) == 1, result.stderr
    line = result.error_lines[0]
    assert source in line and field in line, line
    assert phrase in line, line
    return line
