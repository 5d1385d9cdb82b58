"""Errors raised by ``fitness``. All are ``ValueError`` subclasses: bad names, bad params, bad data.

``fitness`` is a leaf package and cannot use ``evolalloc.core.errors.UserError``; the CLI converts a
``FitnessError`` into one. ``str(err)`` is the whole, one-line message.
"""

from __future__ import annotations

from evolalloc import registry


class FitnessError(ValueError):
    """Bad input the user can fix: an unknown name, a bad task parameter, a bad data file."""


class UnknownNameError(FitnessError, registry.UnknownNameError):
    """An unknown task or metric name; the message has did-you-mean and the valid names.

    It is ``evolalloc.registry``'s error (one type for every unknown name in evolalloc) and a
    ``FitnessError``, so callers catching either keep working.
    """


class FitnessDataError(FitnessError):
    """A data file the user gave is unusable. The message names the file, the line and the field."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None, field: str | None = None):
        self.file = file
        self.line = line
        self.field = field
        where = str(file) if file else ""
        if line is not None:
            where += f":{line}" if where else f"line {line}"
        parts = [p for p in (where, f"field {field!r}" if field else "") if p]
        super().__init__(": ".join(parts + [message]))
