"""results/decode-second-sweep: each second pass against its first, from the run folders' checkpoints.

    python benchmarks/second_sweep_tables.py     # writes results/decode-second-sweep/data.json
    python benchmarks/results_tables.py          # then renders its table into the page

A second pass is a search of decode-repeat-pick's recipe started from a first pass's shipped profile
(``optimizer.start``: its ``allocation-c288.json``), same seed: ``runs/swp-again-s<seed>`` here, its first pass
``../decode-repeat-pick/runs/rpk-best-s<seed>``. Search split only; the start's evaluation is the shipped
profile re-evaluated. A run whose second pass has not finished (fewer group summaries than its first pass) is left out.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"
PAGE = RESULTS / "decode-second-sweep"
FIRST = RESULTS / "decode-repeat-pick" / "runs"


def summary(folder: Path) -> dict:
    """``{"best", "start", "evaluations", "groups"}`` of a search's checkpoint (``groups``: ``GroupSummary``s)."""
    checkpoint = json.loads((folder / "search_checkpoint.json").read_text())
    groups = checkpoint["groups"]
    evaluations = len(checkpoint["start_scores"]) + sum(g["evaluations"] for g in groups)  # the starts, the groups
    return {"best": groups[-1]["best_fitness"], "start": groups[0]["start_fitness"], "evaluations": evaluations,
            "groups": groups}


def row(seed: int, page: Path) -> list[str] | None:
    second, first = summary(page / "runs" / f"swp-again-s{seed}"), summary(FIRST / f"rpk-best-s{seed}")
    if len(second["groups"]) < len(first["groups"]):  # a group not yet searched: the pass is unfinished
        return None
    per_group = " · ".join(f"{g['generations']}, {g['gain']:+.4f}" for g in second["groups"])
    return [f"seed {seed}", f"{first['best']:.4f} ({first['evaluations']})", f"{second['start']:.4f}",
            f"{second['best']:.4f} ({second['evaluations']})", f"{second['best'] - first['best']:+.4f}", per_group]


def main(argv: list[str]) -> int:
    page = Path(argv[0]) if argv else PAGE
    seeds = sorted(int(p.name.removeprefix("swp-again-s")) for p in (page / "runs").glob("swp-again-s*"))
    rows = [r for r in (row(s, page) for s in seeds) if r is not None]
    table = {"columns": ["run", "first pass: best search fitness (evaluations)", "its shipped profile, re-evaluated",
                         "second pass: best (evaluations)", "gain over the first pass",
                         "per group: generations, gain"],
             "rows": rows, "data_kept": True,
             "note": "Search split only (16 prompts, c = 288), from each run folder's search_checkpoint.json. "
                     "Finished second passes only."}
    out = page / "data.json"
    out.write_text(json.dumps({"tables": {"passes": table}}, indent=1) + "\n")
    print(f"{out}: {len(rows)} finished second passes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
