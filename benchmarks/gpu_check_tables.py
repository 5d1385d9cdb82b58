"""``results/gpu-check/data.json``: the tables of the GPU check's page, from the bench cells the
device calls brought back (``bench-*.json`` and ``baseline-*.json`` in each run folder).

    python benchmarks/gpu_check_tables.py results/gpu-check   # then: python benchmarks/results_tables.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

GIB, MIB = 1024**3, 1024**2
COLUMNS = ["run", "attention (decode step)", "shape", "context", "(a) cached s/cand", "(b) re-prefill s/cand",
           "(c) floor s/cand", "b/a", "a/c", "prefill tok/s", "record MiB/prompt bounded (whole)", "device peak GiB",
           "cand/h for 100 instances (est.)"]
ATTENTION = {("run1-old-attention", "bench"): "old: SDPA's choice (cuDNN), mask repeated to query heads",
             ("run2-fix-side-by-side", "baseline"): "cuDNN kept (EVOLALLOC_SDPA_CUDNN=1), GQA folded",
             ("run2-fix-side-by-side",
              "bench"): "fix as run: cuDNN off for every masked call (prefill chunks too), GQA folded",
             ("run3-landed-one-call", "bench"): "as landed at 3d03c70: cuDNN off for masked one-token steps, GQA "
                                                "folded; prefill chunks and unmasked steps SDPA's choice"}
PROBE_COLUMNS = ["run", "step", "route (unmasked decode step)", "rows", "seconds", "seconds per row"]
ROUTES = {"fix": "cuDNN-free (decode_step_on_gpu)", "old": "SDPA's choice (cuDNN)", None: "SDPA's choice (cuDNN)"}


def row(run: str, kind: str, cell: dict) -> list[str]:
    s = cell["settings"]
    return [run, ATTENTION[(run, kind)], cell["shape"], str(s["context"]), f"{cell['cached_per_candidate']:.3f}",
            f"{cell['reprefill_per_candidate']:.3f}", f"{cell['floor_per_candidate']:.3f}",
            f"{cell['reprefill_over_cached']:.1f}x",
            f"{cell['cached_over_floor']:.2f}x", f"{cell['prefill_tokens_per_second']:.0f}",
            f"{cell['record_bytes_bounded'] / MIB:.1f} ({cell['record_bytes_whole'] / GIB:.2f} GiB)",
            f"{cell['device_peak_prefill'] / GIB:.1f}", f"{cell['estimate']['candidates_per_hour']:.0f}"]


def probe_rows(folder: Path) -> list[list[str]]:
    """The timed lines of each run's ``benchmarks/gpu_reprefill_probe.py`` output (probe.jsonl; run 2's
    probe.jsonl is the memory probe's, without steps, and is left out)."""
    rows = []
    for path in sorted(folder.glob("*/probe.jsonl")):
        probes = [json.loads(line) for line in path.read_text().splitlines()]
        landed = any(p.get("route") == "fix" for p in probes)  # (b) ran with the fix only in a side-by-side run
        for probe in probes:
            step = probe.get("step")
            if step not in ("generate-whole", "generate-bounded", "generate-one-row", "reprefill-as-bench",
                            "batch-size"):
                continue
            count = probe.get("rows", 2)  # the first probe named no rows: 2 prompts, one allocation
            if step == "batch-size":
                route = f"{probe['rows_per_forward']} rows per forward (masked: mixed allocations)"
            elif step == "reprefill-as-bench":
                route = ROUTES["fix" if landed else None]
            else:
                route = ROUTES[probe.get("route")]
            rows.append([path.parent.name, step, route, str(count), f"{probe['seconds']:.3f}",
                         f"{probe['seconds'] / count:.3f}"])
    return rows


def main(folder: Path) -> None:
    rows = []
    for run in sorted(p for p in folder.iterdir() if p.is_dir()):
        for kind in ("baseline", "bench"):
            for path in sorted(run.glob(f"{kind}-*.json")):
                rows.append(row(run.name, kind, json.loads(path.read_text())))
    data = {"data_note": "Every figure is a bench gpu cell's JSON or a probe's line (probe.jsonl) in the run "
                         "folders (data kept).",
            "tables": {"cells": {"columns": COLUMNS, "rows": rows, "data_kept": True},
                       "probes": {"columns": PROBE_COLUMNS, "rows": probe_rows(folder), "data_kept": True}}}
    (folder / "data.json").write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
