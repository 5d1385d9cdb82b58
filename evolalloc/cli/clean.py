"""``clean``: free a run folder's disk (its spilled prefill records)."""

from __future__ import annotations

from pathlib import Path

import click

from evolalloc.cli import main


def _size(n: int) -> str:
    """Bytes in the largest unit that keeps the number at least 1 (binary units, as ``record_memory``)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


@main.command()
@click.argument("run", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--force", is_flag=True, help="Clean an unfinished run too (resume will prefill its prompts again).")
def clean(run, force):
    """Remove RUN's spilled prefill records (RUN/records/) and say how many bytes that freed.

    A finished run never reads them again (runs remove them themselves unless the recipe says
    engine.keep_records: true). An unfinished run resumes from them: refused without --force.
    """
    from evolalloc.config.run_folder import RECORDS_FOLDER, load_resolved, missing_outputs, remove_records
    from evolalloc.core.errors import UserError

    if (run / RECORDS_FOLDER).is_dir() and not force and missing_outputs(run, load_resolved(run)):
        raise UserError("the run is not finished: resume reads its records; pass --force to remove them anyway",
                        source=str(run))
    freed = remove_records(run)
    click.echo(f"{run}: removed {RECORDS_FOLDER}/, freed {freed} bytes ({_size(freed)})" if freed
               else f"{run}: no prefill records to remove")
