"""``python -m evolalloc`` is the ``evolalloc`` command."""

from evolalloc.cli import run

run()
