"""The summary of one ``benchmarks/gpu_check.sh`` run: ``check.json`` and ``check.md`` from its parts.

``python -m evolalloc.bench.gpu_report FOLDER`` reads what the script left in ``FOLDER``
(``env.json``: the machine and versions; ``exactness.xml``: pytest's JUnit report of the exactness
tests; ``bench-*.json``: one ``bench gpu`` cell each) and writes the table and the goals of
issue 36, each judged only from a measured figure: a cell that is missing or failed is said to be
unmeasured, never estimated.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

GIB = 1024**3

#: The goals (issue 36), each judged on the cell it names: (label, shape, context, key, test).
GOALS = (
    ("cached path within 1.3x of the bare decode floor at 8k", "llama-3.1-8b", 8192, "cached_over_floor",
     lambda v: v <= 1.3),
    (">= 50x over re-prefill at 32k", "llama-3.1-8b", 32768, "reprefill_over_cached", lambda v: v >= 50),
    ("records of a 32k prompt within 4 GiB at c = 512, bounded", "llama-3.1-8b", 32768, "record_bytes_bounded",
     lambda v: v <= 4 * GIB),
)


def exactness(path: Path) -> dict:
    """Counts from pytest's JUnit XML; ``{"ran": False}`` when the file is missing or unreadable."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return {"ran": False}
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {key: sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    failed = [f"{case.get('classname')}::{case.get('name')}" for s in suites for case in s.iter("testcase")
              if case.find("failure") is not None or case.find("error") is not None]
    return {"ran": True, **counts, "failed": failed,
            "passed": counts["failures"] == 0 and counts["errors"] == 0 and counts["tests"] > 0}


def cells(folder: Path) -> list[dict]:
    out = []
    for path in sorted(folder.glob("bench-*.json")):
        try:
            out.append(json.loads(path.read_text()) | {"file": path.name})
        except (OSError, json.JSONDecodeError):
            continue
    return sorted(out, key=lambda c: (c["shape"], c["settings"]["context"]))


def judge(bench: list[dict]) -> list[dict]:
    """Each goal: met / not met with its figure, or unmeasured (no such cell, or a truncated or CPU one)."""
    verdicts = []
    for label, shape, context, key, test in GOALS:
        cell = next((c for c in bench if c["shape"] == shape and c["settings"]["context"] == context
                     and not c["truncated"] and c["device"].startswith("cuda")), None)
        if cell is None:
            verdicts.append({"goal": label, "verdict": "unmeasured"})
            continue
        value = cell[key]
        verdicts.append({"goal": label, "value": value, "verdict": "met" if test(value) else "not met",
                         "cell": cell["file"]})
    return verdicts


def _row(c: dict) -> str:
    s = c["settings"]
    peak = f"{c['device_peak_prefill'] / GIB:.1f}" if c.get("device_peak_prefill") is not None else "-"
    est = c["estimate"]
    shape = c["shape"] + (f" ({c['layers']} of {c['full_layers']} layers)" if c["truncated"] else "")
    return (f"| {shape} | {s['context']} | {s['budget']} | "
            f"{c['cached_per_candidate']:.3f} | {c['reprefill_per_candidate']:.3f} | "
            f"{c['floor_per_candidate']:.3f} | {c['reprefill_over_cached']:.1f} | {c['cached_over_floor']:.2f} | "
            f"{c['prefill_tokens_per_second']:.0f} | {c['record_bytes_bounded'] / 2**20:.1f} "
            f"| {c['record_bytes_whole'] / 2**20:.1f} | "
            f"{peak} | {est['candidates_per_hour']:.0f} |")


def markdown(env: dict, tests: dict, bench: list[dict], verdicts: list[dict]) -> str:
    lines = [f"# GPU check: {env.get('device_name', '?')}, {env.get('date', '?')}", "",
             f"Command: `{env.get('command', 'benchmarks/gpu_check.sh')}` at commit {env.get('commit', '?')}; "
             f"python {env.get('python', '?')}, torch {env.get('torch', '?')}, "
             f"transformers {env.get('transformers', '?')}; "
             f"mode {env.get('mode', '?')}, dtype {env.get('dtype', '?')}.", ""]
    if tests.get("ran"):
        state = "all passed" if tests["passed"] else (f"{tests['failures'] + tests['errors']} "
                                                      f"FAILED: {', '.join(tests['failed'])}")
        lines.append(f"Exactness tests ({env.get('test_device', '?')}, "
                     f"{env.get('dtype', '?')}, against HF `generate`): "
                     f"{tests['tests']} run, {tests['skipped']} skipped, {state}.")
    else:
        lines.append("Exactness tests: did not run (no report; see check.log).")
    lines += ["",
              "Random weights at each shape; random-token prompts; "
              "per candidate = all prompts' rows of one allocation. "
              "Candidates/hour is an ESTIMATE for the instances the cell "
              "names, scaled linearly from the measured prompts.", "",
              "| shape | context | c | (a) cached s/cand | (b) re-prefill "
              "s/cand | (c) floor s/cand | b/a | a/c | prefill tok/s | "
              "record MiB/prompt (bounded) | (whole) | device peak GiB | cand/h (est.) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [_row(c) for c in bench] or ["| (no bench cell finished: see check.log) |" + " |" * 12]
    lines += ["", "Goals (issue 36), judged only on GPU cells at the full 8B shape:", ""]
    for v in verdicts:
        figure = f" ({v['value'] / GIB:.2f} GiB)" if "4 GiB" in v["goal"] and "value" in v else (f" ({v['value']:.2f})"
                                                                                                 if "value" in v
                                                                                                 else "")
        lines.append(f"- {v['goal']}: **{v['verdict']}**{figure}")
    for c in bench:  # a cell run with --profile carries where its time went (issue 36, item 4)
        if c.get("profile"):
            lines += ["", f"Profile of {c['file']}:", "", "```text", c["profile"].rstrip(), "```"]
    return "\n".join(lines) + "\n"


def write_report(folder: Path) -> dict:
    env_path = folder / "env.json"
    env = json.loads(env_path.read_text()) if env_path.is_file() else {}
    tests = exactness(folder / "exactness.xml")
    bench = cells(folder)
    verdicts = judge(bench)
    summary = {"env": env, "exactness": tests, "bench": bench, "goals": verdicts}
    (folder / "check.json").write_text(json.dumps(summary, indent=2) + "\n")
    (folder / "check.md").write_text(markdown(env, tests, bench, verdicts))
    return summary


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m evolalloc.bench.gpu_report FOLDER", file=sys.stderr)
        return 2
    folder = Path(argv[0])
    write_report(folder)
    print((folder / "check.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
