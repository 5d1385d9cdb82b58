"""results/decode-two-pass: each search's fitness at the end of its first pass and of its second (search split).

    python benchmarks/two_pass_tables.py        # writes the tp-passes table into results/decode-two-pass/data.json
    python benchmarks/results_tables.py         # then renders it into the page

Read from each run folder's ``search_checkpoint.json`` (``runs/tp-best-s<seed>``) with the product's own
reader (``evolalloc.search.checkpoint.load_checkpoint``): the start's best, the best when the first pass's last
group stopped, the best when the second pass's did, and the evaluations of each. Reported beside the
pre-registered test; no verdict reads it. A search not yet finished is a row that says how far it got. Other
tables in ``data.json`` (the test's, ``decode_time_tables.py``) are kept.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from decode_time_tables import merge_tables  # noqa: E402 - sibling scripts, not a package

from evolalloc.search.checkpoint import load_checkpoint  # noqa: E402
from evolalloc.search.stopping import GroupSummary  # noqa: E402

PAGE = Path(__file__).resolve().parents[1] / "results" / "decode-two-pass"
PREFIX = "tp-best-s"


def row(folder: Path) -> list[str]:
    """One run: start, end of pass 1 (evaluations), end of pass 2 (evaluations), the second pass's gain."""
    checkpoint = load_checkpoint(folder)
    config = checkpoint.config
    groups = [GroupSummary.from_dict(g) for g in checkpoint.groups]
    per_pass = len(config.schedule()) // config.passes
    finished = {p: [g for g in groups if g.pass_number == p] for p in (1, 2)}
    starts = [v for v in checkpoint.start_scores.values() if v is not None]
    cells = [folder.name.removeprefix("tp-"), f"{max(starts):.4f}" if starts else "–"]
    evaluations = len(checkpoint.start_scores)
    ends = {}
    for p in (1, 2):
        done = finished[p]
        evaluations_p = sum(g.evaluations for g in done) + (evaluations if p == 1 else 0)
        if len(done) == per_pass:
            ends[p] = done[-1].best_fitness
            cells.append(f"{ends[p]:.4f} ({evaluations_p})")
        elif p == 1 or 1 in ends:  # this pass has begun (the second begins when the first ends)
            cells.append(f"under way: {len(done)} of {per_pass} groups")
        else:
            cells.append("–")
    cells.append(f"{ends[2] - ends[1]:+.4f}" if len(ends) == 2 else "–")
    return cells


def main(argv: list[str]) -> int:
    page = Path(argv[0]) if argv else PAGE
    folders = sorted((page / "runs").glob(f"{PREFIX}*"), key=lambda p: int(p.name.removeprefix(PREFIX)))
    rows = [row(folder) for folder in folders if (folder / "search_checkpoint.json").exists()]
    table = {"columns": ["run", "start: best of the start's profiles", "end of pass 1 (evaluations)",
                         "end of pass 2 (evaluations)", "gain of pass 2"],
             "rows": rows, "data_kept": True,
             "note": "Search-split fitness (16 prompts, c = 288) from each run folder's search_checkpoint.json; "
                     "evaluations of pass 1 count the start's. Reported beside the test; no verdict reads it."}
    print(f"{merge_tables(page, {'tp-passes': table})}: {len(rows)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
