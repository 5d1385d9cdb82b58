"""``benchmarks/gpu_search_tables.py``: the GPU page's tables are the calls' JSON, and the CPU side is parsed right."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_search_tables as tables  # noqa: E402


def test_the_cpu_report_line_is_read_as_seconds_per_phase():
    report = "Wall time: 7 min 56 s.\n\nWhere it went: starting 4 s, prefilling 3 min 56 s, comparing 1 min 19 s.\n"
    assert tables.cpu_phases(report) == {"starting": 4.0, "prefilling": 236.0, "comparing": 79.0}
    assert tables.seconds_of("2 min 03 s") == 123.0 and tables.seconds_of("12 s") == 12.0


def test_the_tables_are_rebuilt_from_the_calls_json(tmp_path):
    page = tmp_path / "gpu-search"
    shutil.copytree(tables.PAGE, page)
    (page / "data.json").unlink()
    assert tables.main([str(page)]) == 0
    built = json.loads((page / "data.json").read_text())["tables"]
    gpu = json.loads((page / "call5-main-job" / "main-job.json").read_text())
    whole = built["gs-main"]["rows"][-1]
    assert float(whole[2].strip("*")) == pytest.approx(sum(gpu["phases"].values()), abs=0.05)
    assert float(whole[3].strip("*x")) == pytest.approx(float(whole[1].strip("*")) / float(whole[2].strip("*")),
                                                        abs=0.005)
    assert len(built["gs-heldout"]["rows"]) == 12  # 4 methods x 3 budgets
    workers = json.loads((page / "call3-workers-bf16" / "workers.json").read_text())
    assert f"**{workers['ray2_over_ray1']:.2f}x**" in [r[2] for r in built["gs-workers"]["rows"]]
    cell = json.loads((page / "call1-32k" / "bench-llama8b-32k.json").read_text())
    assert built["gs-32k"]["rows"][0][5] == f"{cell['reprefill_per_candidate'] / cell['cached_per_candidate']:.1f}x"
    # what the page shows is what was built
    assert json.loads((tables.PAGE / "data.json").read_text())["tables"] == built
