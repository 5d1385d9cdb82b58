"""User-facing errors: bad input the user can fix (a file, a field, a name).

The CLI prints ``UserError`` as one line (no traceback) and exits with status 2; ``RunStopped``
(a run that cannot go on for a reason its message names, e.g. an evaluator that fails on every
candidate) as one line with status 1. Everything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input. ``str(err)`` is the whole message: it names the file and field at fault."""

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.source = source
        self.field = field
        where = ": ".join(part for part in (source, field) if part)
        super().__init__(f"{where}: {message}" if where else message)


class RunStopped(RuntimeError):
    """A run stopped on purpose, for a reason ``str(err)`` names whole (what failed, what was kept, what to do)."""
