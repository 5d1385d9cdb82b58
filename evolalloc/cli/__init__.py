"""The ``evolalloc`` command line. Each subcommand lives in its own module of this package.

Heavy imports (torch, transformers, ray) happen inside commands so that ``--help`` is instant.
"""

from __future__ import annotations

import click

from evolalloc import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="evolalloc")
def main() -> None:
    """evolalloc — search per-layer / per-KV-head KV-cache budgets with CMA-ES (EvolKV),
    evaluate them with a real eviction runtime, and export budget profiles."""


def _register() -> None:
    # Each module adds its commands to ``main``; a missing optional module is not an error.
    import importlib

    for name in ("bench", "tasks", "search_cmds", "scorer", "generate", "serve", "gates", "ppo", "headroom", "model",
                 "clean"):
        try:
            importlib.import_module(f"evolalloc.cli.{name}")
        except ModuleNotFoundError as exc:  # only tolerate the module itself being absent
            if exc.name != f"evolalloc.cli.{name}":
                raise


_register()


def run() -> None:
    """Console entry point: user errors become one clear line and exit status 2."""
    from evolalloc.core.process_clock import mark_command_start

    mark_command_start()  # before the commands import torch: a run's wall time counts those seconds
    from evolalloc.core.errors import RunStopped, UserError

    _quiet_libraries()
    try:
        main(standalone_mode=False)
    except UserError as err:
        click.echo(f"error: {err}", err=True)
        raise SystemExit(2)
    except RunStopped as err:
        click.echo(f"error: {err}", err=True)
        raise SystemExit(1)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        raise SystemExit(130)
    except click.ClickException as err:
        err.show()
        raise SystemExit(err.exit_code)
    except click.exceptions.Exit as err:
        raise SystemExit(err.exit_code)


def _quiet_libraries() -> None:
    """Our own progress bars say what is happening; silence the libraries' chatter."""
    import logging
    import os

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    logging.getLogger("optuna").setLevel(logging.WARNING)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass
