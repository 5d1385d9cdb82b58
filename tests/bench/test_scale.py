"""``evolalloc bench scale``: its options, its sweep plan, extrapolation and the table (no timings)."""

from __future__ import annotations

import pytest

from evolalloc.bench import scale
from evolalloc.bench.scale import budget_vs_context, extrapolate, fits, parse_sizes, sweep, table
from evolalloc.bench.scale_cell import CellResult, CellSettings, cell_allocations, cell_bound, measure
from evolalloc.core.errors import UserError
from tests.clitools import run_cli

MiB = 2**20


def cell(context: int, instances: int, *, seconds=(0.5, 1.0), tokens=(10.0, 10.0), record_mib=50.0) -> CellResult:
    return CellResult(context_tokens=context, instances=instances, prompt_tokens=context - 3.0,
                      peak_rss=(900 + record_mib * instances) * MiB,
                      loaded_rss=900 * MiB, record_bytes=int(record_mib * instances * MiB), prefill_seconds=2.0,
                      eval_seconds={"64": seconds[0], "256": seconds[1]},
                      generated_tokens={"64": tokens[0], "256": tokens[1]})


def test_sizes_are_parsed_from_commas_and_blanks_are_skipped():
    assert parse_sizes("1000, 2000,,4000", "--contexts") == (1000, 2000, 4000)
    assert parse_sizes("", "--extrapolate") == ()


@pytest.mark.parametrize("text", ["1k", "100,-5", "0", "2.5"])
def test_a_size_that_is_not_a_positive_whole_number_names_the_option(text):
    with pytest.raises(UserError, match=r"^--counts: must be positive whole numbers"):
        parse_sizes(text, "--counts")


@pytest.mark.parametrize("args, option", [
    (["--contexts", "1000,two"], "--contexts"),
    (["--budgets", ""], "--budgets"),
    (["--extrapolate", "-1"], "--extrapolate"),
    (["--task", "no_such_task"], "--task"),
    (["--scorer", "snapcav"], "--scorer"),
])
def test_bad_options_are_refused_in_one_line_before_any_cell_runs(monkeypatch, args, option):
    monkeypatch.setattr(scale, "run_cell", lambda settings: pytest.fail("a cell ran despite a bad option"))
    result = run_cli("bench", "scale", *args)
    assert result.code == 2
    assert len(result.error_lines) == 1 and result.error_lines[0].startswith(f"error: {option}:")


def test_extrapolation_adds_the_measured_bytes_per_record_and_scales_the_evaluation():
    measured = cell(8000, 2, record_mib=400.0)
    estimate = extrapolate(measured, 200)
    assert estimate.extrapolated_from == 2 and estimate.instances == 200
    assert estimate.record_bytes == 200 * 400 * MiB
    assert estimate.peak_rss == measured.peak_rss + 198 * 400 * MiB
    assert estimate.eval_seconds == {"64": 50.0, "256": 100.0}
    assert estimate.prefill_seconds == measured.prefill_seconds
    with pytest.raises(ValueError):
        extrapolate(CellResult(8000, 2, error="killed"), 10)


def test_the_sweep_measures_contexts_then_counts_then_extrapolates_from_the_largest_context(monkeypatch):
    asked = []

    def fake(settings: CellSettings) -> CellResult:
        asked.append((settings.context_tokens, settings.instances))
        return cell(settings.context_tokens, settings.instances)

    monkeypatch.setattr(scale, "run_cell", fake)
    base = CellSettings(model="m", task="passkey", scorer="snapkv", context_tokens=500, instances=2, budgets=(64, 256),
                        candidates=1)
    cells = sweep(base, contexts=[1000, 4000, 2000], counts=[3, 6], count_context=500, extrapolate_to=[50])
    assert asked == [(1000, 2), (4000, 2), (2000, 2), (500, 3), (500, 6)]
    assert [(c.context_tokens, c.instances, c.extrapolated_from) for c in cells[-1:]] == [(4000, 50, 2)]


def test_the_table_labels_measured_extrapolated_and_failed_rows():
    measured = cell(8000, 2)
    lines = table([measured, extrapolate(measured, 200), CellResult(8000, 4, error="MemoryError")], [64, 256])
    assert "peak RSS MiB" in lines[0] and "eval @256: s/cand (tok)" in lines[0]
    assert lines[1].endswith("measured") and "1000" in lines[1]  # 900 MiB loaded + 2 x 50 MiB records
    assert lines[2].endswith("extrapolated from 2 measured") and " 200 " in lines[2]
    assert "failed: MemoryError" in lines[3]


def test_the_summary_compares_evaluation_cost_per_generated_token_across_contexts_and_budgets():
    cells = [cell(1000, 2, seconds=(0.5, 2.0), tokens=(10, 10)), cell(8000, 2, seconds=(1.0, 2.0), tokens=(20, 10))]
    lines = budget_vs_context(cells, [64, 256])
    assert "  budget 64: 0.0500 at 1000 tokens -> 0.0500 at 8000 tokens (1.00x for 8.0x the context)" in lines
    assert "  1000 tokens: 0.0500 at budget 64 -> 0.2000 at budget 256 (4.00x)" in lines


def test_a_cell_whose_process_fails_becomes_a_failed_row():
    settings = CellSettings(model="/no/such/model", task="passkey", scorer="snapkv", context_tokens=100, instances=1,
                            budgets=(32,), candidates=1)
    result = scale.run_cell(settings)
    assert result.error and "no such model path" in result.error


def test_the_fit_lines_say_measured_or_extrapolated_and_whether_the_peak_fits():
    measured = cell(8000, 2, record_mib=100.0)
    measured.bound = 1024
    lines = fits([measured, extrapolate(measured, 200), CellResult(8000, 4, error="killed")], 16 * 2**30)
    assert len(lines) == 2  # a failed row says nothing
    assert lines[0].startswith("2 instances of 8000 tokens: peak 1.07 GiB (measured; "
                               "records 100.0 MiB each, bounded at b_max = 1024)")
    assert lines[0].endswith("fits in 16 GiB")
    # 1100 MiB measured + 198 x 100 MiB = 20900 MiB: above 16 GiB.
    assert "(extrapolated from 2 measured: their peak + 198 more records" in lines[1]
    assert lines[1].endswith("does NOT fit in 16 GiB")


def test_a_cells_bound_is_the_largest_budget_any_of_its_candidates_gives_a_unit():
    settings = CellSettings(model="m", task="passkey", scorer="snapkv", context_tokens=500, instances=2,
                            budgets=(64, 256),
                            candidates=3)
    warm, per_budget = cell_allocations(settings, 30, 3, 36)
    assert [len(per_budget[b]) for b in (64, 256)] == [3, 3] and len(warm) == 1
    largest = max(int(a.max()) for a in [*warm, *per_budget[64], *per_budget[256]])
    assert cell_bound(warm, per_budget) == largest
    assert largest > 256  # random profiles spend unevenly: some layer gets more than the mean


def test_a_real_cell_keeps_bounded_records_smaller_than_whole_ones_with_the_same_scores(tiny_model_dir):
    base = dict(model=str(tiny_model_dir), task="passkey", scorer="snapkv", context_tokens=600, instances=2,
                budgets=(40,),
                candidates=1, threads=1)
    bounded = measure(CellSettings(**base))
    whole = measure(CellSettings(**base, bounded=False))
    assert whole.bound is None and whole.record_bytes == whole.whole_bytes
    assert bounded.bound is not None and bounded.bound < bounded.prompt_tokens
    assert bounded.whole_bytes == whole.whole_bytes and bounded.record_bytes < 0.6 * whole.record_bytes
    assert bounded.generated_tokens == whole.generated_tokens  # the same answers' lengths from bounded records
