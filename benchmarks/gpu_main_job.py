"""A search recipe end to end on this machine's GPU, with the figures a cluster user asks first (issue 53, item 1).

Runs ``evolalloc search RECIPE`` in this process (so the device's peak memory can be read after it), then writes
one JSON: the wall time, where it went by phase (the run folder's ``sessions.json``, the product's own clock),
the device's peak allocated and reserved memory, the versions and the device. The run folder itself (profiles,
comparison.json, report, trial store) is what the held-out table is read from.

    python benchmarks/gpu_main_job.py runs/quickstart.yaml --runs-dir /tmp/runs --name gpu --json OUT.json \\
        [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import traceback
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe")
    parser.add_argument("--runs-dir", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--json", required=True, type=Path)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)

    import torch
    import transformers

    from evolalloc.cli import main as cli

    cuda = torch.cuda.is_available()
    command = ["search", args.recipe, "--runs-dir", args.runs_dir, "--name", args.name]
    for item in args.sets:
        command += ["--set", item]
    started = time.time()
    error = None
    try:
        cli.main(command, standalone_mode=False)
    except SystemExit as exc:  # click's exit: a non-zero code is a failed run
        error = None if not exc.code else f"exit {exc.code}"
    except Exception as exc:  # noqa: BLE001 - recorded as a failure, with its first line
        traceback.print_exc()  # the whole of it in the log: a device-only failure is read from there
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    wall = time.time() - started
    run_dir = Path(args.runs_dir) / args.name
    sessions_file = run_dir / "sessions.json"
    sessions = json.loads(sessions_file.read_text()) if sessions_file.is_file() else []
    figures = {
        "command": "evolalloc " + " ".join(command),
        "error": error,
        "wall_seconds": round(wall, 2),
        "phases": sessions[-1].get("phases") if sessions else None,
        "device": torch.cuda.get_device_name() if cuda else platform.processor() or platform.machine(),
        "peak_allocated_bytes": torch.cuda.max_memory_allocated() if cuda else None,
        "peak_reserved_bytes": torch.cuda.max_memory_reserved() if cuda else None,
        "torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
    }
    args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures))
    return 0 if error is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
