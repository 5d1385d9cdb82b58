"""Command-line options several commands share, declared once (same name, default and type).

Each is a function returning a click decorator, so a command can keep its own parameter name or
help text where its meaning is narrower (``--model`` of ``tasks`` only measures lengths).
"""

from __future__ import annotations

import click

from evolalloc import DEFAULT_MODEL


def model_option(dest: str = "model",
                 help: str = "Model spec: bundled:<name>, a local HF model folder or a .gguf file.",
                 default: str | None = DEFAULT_MODEL):
    """``--model``: the model a command loads (default: the bundled model; ``None``: the command chooses)."""
    return click.option("--model", dest, default=default, show_default=default is not None, help=help)


def seed_option(default: int = 0, help: str | None = None):
    """``--seed``: a whole number that makes the command's draws reproducible."""
    return click.option("--seed", type=int, default=default, show_default=True, help=help)


set_option = click.option(
    "--set", "overrides", multiple=True, metavar="KEY=VALUE",
    help="Override a recipe value, e.g. --set optimizer.generations_per_group=1 (repeatable).",
)
progress_option = click.option("--progress/--no-progress", default=True, show_default=True, help="Show progress bars.")
