"""Secrets stay in the service: URL passwords out of responses and the log, tokens out of children.

A job's recipe may hold a database URL with its password (a job stored before submissions were
confined, or an error message quoting a URL); every job response and every log line shows it as
``***``. Worker and validator processes get the service's environment without its tokens: they
run recipes, and need none.
"""

from __future__ import annotations

import logging
import os
import re

# ``scheme://user:password@host`` -> ``scheme://user:***@host`` (a storage or database URL).
_CREDENTIALS = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*):(?P<secret>[^@/\s]+)@")
SECRET_ENV = ("EVOLALLOC_SERVICE_TOKEN",)


def redact(value):
    """``value`` with every URL password replaced by ``***``: strings, and strings inside lists and mappings."""
    if isinstance(value, str):
        return _CREDENTIALS.sub(lambda m: f"{m['head']}:***@", value) if "@" in value else value
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


class RedactingFormatter(logging.Formatter):
    """Log lines (tracebacks included) with URL passwords replaced, as every response has them."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def without_secrets(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process: the service's tokens are the HTTP process's alone."""
    env = dict(os.environ if env is None else env)
    for name in SECRET_ENV:
        env.pop(name, None)
    return env
