"""report.md: the recipe summary, progress per group, the comparison table with its numbers."""

from evolalloc.config.resolved import resolve_run
from evolalloc.report.markdown import render_report, write_report


def section(text, title):
    return text.split(f"## {title}")[1].split("\n## ")[0]


def test_the_report_says_what_was_searched(recipe, history, rows):
    text = render_report(resolve_run(recipe), history=history, comparison=rows)
    searched = section(text, "What was searched")
    assert "`bundled:smollm2-135m-instruct`" in searched and "passkey" in searched
    assert "| target budget c | 64 tokens per (layer, KV head) |" in searched
    assert "| expansions | 128, 256 (proportional rule) |" in searched
    assert "2 generations per group" in searched


def test_progress_lists_the_best_fitness_per_group_and_the_failures(recipe, history):
    progress = section(render_report(resolve_run(recipe), history=history), "Best fitness over time")
    assert "8 evaluations, 1 failed." in progress
    assert "| 1 | 4 | 1 | 0.7000 | +0.0000 | 3 | 4 | 0.7000 |" in progress
    assert "| 2 | 4 | 0 | 1.1000 | +0.0000 | 4 | 8 | 1.1000 |" in progress


def test_the_comparison_table_holds_means_intervals_and_p_values(recipe, rows):
    table = section(render_report(resolve_run(recipe), comparison=rows), "Comparison on held-out instances")
    evolved = next(line for line in table.splitlines() if line.startswith("| 64 | evolved"))
    assert "| 20 | 0.900 |" in evolved and evolved.endswith("| — | — |")
    streaming = next(line for line in table.splitlines() if line.startswith("| 64 | streaming"))
    assert "| 0.150 |" in streaming and "+0.750" in streaming and streaming.rstrip(" |").endswith("*")
    uniform = next(line for line in table.splitlines() if line.startswith("| 64 | uniform"))
    assert "+0.000" in uniform and "1.000 †" in uniform  # all-zero differences: bootstrap p, marked
    assert "† every difference is zero" in table


def test_the_report_links_allocations_and_plots_and_gives_the_wall_time(recipe):
    text = render_report(
        resolve_run(recipe), allocations={64: "allocation-c64.json", 128: "allocation-c128.json"},
        plots={"Budget per layer": "budgets-per-layer.png"}, wall_seconds=754,
    )
    assert "Wall time: 12 min 34 s." in text
    assert "- c = 64 (target): [allocation-c64.json](allocation-c64.json)" in text
    assert "- c = 128 (expansion, proportional rule): [allocation-c128.json](allocation-c128.json)" in text
    assert "![Budget per layer](budgets-per-layer.png)" in text


def test_the_report_says_where_the_time_went_by_phase(recipe):
    went = {"starting": 12.4, "prefilling": 236.0, "searching": 203.0, "shipping": 0.4, "comparing": 84.0}
    text = render_report(resolve_run(recipe), wall_seconds=540, phase_seconds=went)
    assert "Where it went: starting 12 s, prefilling 3 min 56 s, searching 3 min 23 s, comparing 1 min 24 s." in text
    partial = render_report(resolve_run(recipe), wall_seconds=540, phase_seconds=went, phases_complete=False)
    assert "comparing 1 min 24 s (only the sessions that recorded it: not a killed one)." in partial
    assert "Where it went" not in render_report(resolve_run(recipe), wall_seconds=540)  # none recorded: no line


def test_a_report_without_a_comparison_says_so(recipe):
    assert "Not compared yet" in render_report(resolve_run(recipe))


def test_write_report_writes_report_md(recipe, history, rows, tmp_path):
    path = write_report(tmp_path, resolve_run(recipe), history=history, comparison=rows, best={"fitness": 1.1})
    assert path == tmp_path / "report.md"
    text = path.read_text()
    assert text.startswith("# evolalloc run `demo`") and "Best allocation: fitness 1.1000." in text
