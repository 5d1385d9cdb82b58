"""results/gpu-search: the tables of issue 53's device calls, from the JSON each call brought back.

    python benchmarks/gpu_search_tables.py      # writes the gs-* tables into results/gpu-search/data.json
    python benchmarks/results_tables.py         # then renders them into the page

Read from the page's folders (each a device call's $OUT, as it came back):
  call5-main-job/main-job.json and run/      the README main job on the GPU (wall time, phases, peak memory,
                                              the run folder's comparison.json)
  ../main-job/faster-run/                     the same recipe and seed on this machine's 2 CPU cores (its report's
                                              phases and comparison.json), the CPU side of the table
  call3-workers-bf16/, call6-workers-fp32/    `evolalloc bench workers` on the card (workers.json)
  call1-32k/bench-llama8b-32k.json            `evolalloc bench gpu` at the Llama-3.1-8B shape at 32k tokens
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from decode_time_tables import merge_tables  # noqa: E402 - sibling scripts, not a package

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "results" / "gpu-search"
CPU_RUN = ROOT / "results" / "main-job" / "faster-run"
PHASES = ["starting", "drawing instances", "loading model", "prefilling", "searching", "profiling lukv", "shipping",
          "comparing"]


def seconds_of(words: str) -> float:
    """``3 min 56 s`` / ``4 s`` -> seconds."""
    minutes = re.search(r"(\d+) min", words)
    secs = re.search(r"(\d+) s", words)
    return 60.0 * (int(minutes.group(1)) if minutes else 0) + (int(secs.group(1)) if secs else 0)


def cpu_phases(report: str) -> dict[str, float]:
    """The CPU run's phases from its report's ``Where it went:`` line (that run kept no sessions.json)."""
    line = next(line for line in report.splitlines() if line.startswith("Where it went:"))
    out = {}
    for part in line.removeprefix("Where it went:").rstrip(".").split(","):
        match = re.match(r"\s*([a-z ]+?) (\d.*)$", part)
        out[match.group(1)] = seconds_of(match.group(2))
    return out


def main_table(page: Path) -> dict:
    gpu = json.loads((page / "call5-main-job" / "main-job.json").read_text())
    cpu_report = (CPU_RUN / "report.txt").read_text()
    cpu = cpu_phases(cpu_report)
    cpu_wall = seconds_of(re.search(r"Wall time: ([^.]+)\.", cpu_report).group(1))
    rows = []
    for phase in PHASES:
        c, g = cpu.get(phase), gpu["phases"].get(phase)
        rows.append([phase, f"{c:.0f}" if c is not None else "under 1 s (not listed)", f"{g:.1f}",
                     f"{c / g:.1f}x" if c and g else "–"])
    gpu_wall = sum(gpu["phases"].values())
    rows.append(["**the run (its own clock)**", f"**{cpu_wall:.0f}**", f"**{gpu_wall:.1f}**",
                 f"**{cpu_wall / gpu_wall:.2f}x**"])
    return {"columns": ["phase", "2 CPU cores: s (results/main-job/faster-run)", "H200: s", "CPU / GPU"],
            "rows": rows, "data_kept": True,
            "note": f"GPU: the run folder's sessions.json (call 5); peak device memory "
                    f"{gpu['peak_allocated_bytes'] / 2**30:.2f} GiB allocated, "
                    f"{gpu['peak_reserved_bytes'] / 2**30:.2f} GiB reserved; the process's whole wall "
                    f"time {gpu['wall_seconds']:.1f} s. CPU: that run's report (AMD EPYC, 2 cores, bfloat16, nothing "
                    "else running), same recipe and seed. The GPU run was started in-process by "
                    "benchmarks/gpu_main_job.py, which imported torch before the run's clock began: its 'starting' "
                    "leaves those imports out and holds the bundled model's first conversion from GGUF instead."}


def p(versus: dict | None) -> str:
    return "–" if versus is None else ("<0.001" if versus["p_value"] < 0.001 else f"{versus['p_value']:.3f}")


def _cell(score: dict) -> str:
    return f"{score['mean']:.3f} [{score['low']:.2f}, {score['high']:.2f}]"


def heldout_table(page: Path) -> dict:
    cpu = json.loads((CPU_RUN / "comparison.json").read_text())
    gpu = json.loads((page / "call5-main-job" / "run" / "comparison.json").read_text())
    gpu_rows = {(r["method"], r["budget"]): r for r in gpu["rows"]}
    rows = []
    for r in cpu["rows"]:
        g = gpu_rows[(r["method"], r["budget"])]
        rows.append([r["method"], f"{r['budget']:.0f}", _cell(r["score"]), p(r["versus"]), _cell(g["score"]),
                     p(g["versus"]), f"{g['score']['mean'] - r['score']['mean']:+.3f}"])
    return {"columns": ["method", "c", "CPU: mean [95% CI]", "CPU: p vs evolved", "GPU: mean [95% CI]",
                        "GPU: p vs evolved", "GPU − CPU"],
            "rows": rows, "data_kept": True,
            "note": "64 held-out prompts (seed 0), greedy generation scored by the task's metric; each side's own "
                    "search, profile and baselines (comparison.json of each run folder)."}


def workers_table(page: Path) -> dict:
    rows = []
    for folder in ("call3-workers-bf16", "call6-workers-fp32"):
        data = json.loads((page / folder / "workers.json").read_text())
        for engine in data["engines"]:
            same = engine["identical_to_local"]
            rows.append([f"{folder.split('-')[0]} ({data['dtype']})", engine["name"], f"{engine['per_minute']:.1f}",
                         f"{engine['best_seconds']:.2f}", f"{engine['setup_seconds']:.1f}",
                         "–" if same is None else ("yes" if same else "**no**")])
        rows.append([f"{folder.split('-')[0]} ({data['dtype']})", "**2 workers / 1 worker**",
                     f"**{data['ray2_over_ray1']:.2f}x**", "", "", ""])
    return {"columns": ["call (dtype)", "engine", "evaluations/min", "best s per population", "set-up s",
                        "results identical to local"],
            "rows": rows, "data_kept": True,
            "note": "16 passkey prompts of ~2044 tokens, 16 random allocations at c = 128 a population, best of 3 "
                    "timed populations per engine, round robin; every engine on the one H200 (the Ray workers a third "
                    "of it each, so that both pools fit)."}


def reprefill_table(page: Path) -> dict:
    cell = json.loads((page / "call1-32k" / "bench-llama8b-32k.json").read_text())
    s = cell["settings"]
    return {"columns": ["shape", "context", "(a) cached s/cand", "(b) re-prefill s/cand", "(c) floor s/cand",
                        "b/a", "goal", "prefill tok/s", "record MiB/prompt bounded (whole)"],
            "rows": [[cell["shape"], str(s["context"]), f"{cell['cached_per_candidate']:.3f}",
                      f"{cell['reprefill_per_candidate']:.3f}", f"{cell['floor_per_candidate']:.3f}",
                      f"{cell['reprefill_over_cached']:.1f}x", ">= 50x",
                      f"{cell['prefill_tokens_per_second']:.0f}",
                      f"{cell['record_bytes_bounded'] / 2**20:.1f} ({cell['record_bytes_whole'] / 2**30:.2f} GiB)"]],
            "data_kept": True,
            "note": f"{s['prompts']} random-token prompts x {s['candidates']} random allocations at c = {s['budget']} "
                    f"(b measured on {s['reprefill_candidates']}), {s['new_tokens']} tokens decoded per row, random "
                    f"weights, bfloat16, {cell['device_name']}, torch {cell['versions']['torch']}."}


def main(argv: list[str]) -> int:
    page = Path(argv[0]) if argv else PAGE
    tables = {"gs-main": main_table(page), "gs-heldout": heldout_table(page), "gs-workers": workers_table(page),
              "gs-32k": reprefill_table(page)}
    print(f"{merge_tables(page, tables)}: {', '.join(tables)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
