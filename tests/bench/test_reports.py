"""What the benchmarks print, from hand-made measurements: the figures, ratios and labels of each
report (``lines()``) and the inputs they build. No timing is taken here."""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.bench.asktell import LAYERS, TARGET, AsktellBench, objective, study_body
from evolalloc.bench.eval import EvalBenchResult, random_allocations
from evolalloc.bench.fitness import FitnessBenchResult, FitnessRow
from evolalloc.bench.service import ServiceBench
from evolalloc.bench.workers import EngineTiming, WorkersBenchResult


def test_eval_report_states_the_ratios_of_the_measured_seconds():
    result = EvalBenchResult(prompts=4, prompt_tokens=990.4, candidates=8, cached_per_candidate=2.0,
                             reprefill_per_candidate=10.0, reprefill_candidates=2, floor_per_candidate=1.6,
                             tokens_per_candidate=40, likelihood_per_candidate=0.5)
    lines = result.lines()
    assert lines[0].startswith("prompts: 4 passkey prompts, mean 990 tokens; 8 random allocations")
    assert "measured on 2" in lines[2]
    assert lines[4].split(":")[1].split() == ["5.0x"]        # (b)/(a) = 10 / 2
    assert lines[5].split(":")[1].split() == ["1.25x"]       # (a)/floor = 2 / 1.6
    assert lines[7].split(":")[1].split()[0] == "4.0x"       # (a)/(c) = 2 / 0.5


def test_random_allocations_average_exactly_the_target_and_respect_the_floor():
    rows = random_allocations(5, num_layers=6, num_kv_heads=2, target=32, floor=4, seed=1)
    assert len(rows) == 5
    for budgets in rows:
        assert budgets.shape == (6, 2)
        assert budgets.sum() == 32 * 6 * 2 and budgets.min() >= 4
        assert (budgets[:, 0] == budgets[:, 1]).all()  # one budget a layer, repeated over its heads
    again = random_allocations(5, num_layers=6, num_kv_heads=2, target=32, floor=4, seed=1)
    assert all((a == b).all() for a, b in zip(rows, again))


def test_fitness_report_has_a_row_a_budget_and_the_full_cache_labelled():
    result = FitnessBenchResult(prompts=2, prompt_tokens=1000.0, scorer="snapkv", rows=[
        FitnessRow(budget=64, exact=0.25, graded=0.5, likelihood=0.125), FitnessRow(budget=None, exact=1.0, graded=1.0,
                                                                                    likelihood=0.875)])
    lines = result.lines()
    assert "uniform snapkv allocations" in lines[0]
    assert lines[1].split() == ["budget", "exact", "match", "graded", "likelihood"]
    assert lines[2].split() == ["64", "0.250", "0.500", "0.125"]
    assert lines[3].split() == ["full", "1.000", "1.000", "0.875"]


def test_workers_report_uses_the_best_population_and_compares_the_engines():
    timings = [EngineTiming("local", 1.0, [6.0, 4.0]), EngineTiming("ray, 1 worker", 3.0, [8.0], identical=True),
               EngineTiming("ray, 2 workers", 5.0, [5.0, 4.0], identical=False)]
    result = WorkersBenchResult(prompts=2, prompt_tokens=500.0, candidates=8, cpus=2, timings=timings)
    lines = result.lines()
    assert "120.0 evaluations/min" in lines[1] and "best of 2:   4.00 s" in lines[1]  # 60 * 8 / 4
    assert "identical" not in lines[1]
    assert lines[2].endswith("results identical to local: yes") and lines[3].endswith("results identical to local: NO")
    assert lines[4].split(":")[1].split() == ["0.50x"]  # 60 / 120
    assert lines[5].split(":")[1].split() == ["2.00x"]  # 120 / 60
    assert lines[0].endswith("device: cpu (float32)")


def test_workers_json_carries_each_engine_and_the_two_ratios():
    timings = [EngineTiming("local", 1.0, [4.0]), EngineTiming("ray, 1 worker", 3.0, [8.0], identical=True),
               EngineTiming("ray, 2 workers", 5.0, [5.0], identical=True)]
    data = WorkersBenchResult(prompts=16, prompt_tokens=2048.0, candidates=16, cpus=16, timings=timings,
                              device="cuda", dtype="bfloat16").to_dict()
    assert data["device"] == "cuda" and data["dtype"] == "bfloat16"
    assert [e["per_minute"] for e in data["engines"]] == [240.0, 120.0, 192.0]  # 60 * 16 / best
    assert data["ray1_over_local"] == 0.5 and data["ray2_over_ray1"] == 1.6
    assert [e["identical_to_local"] for e in data["engines"]] == [None, True, True]


def test_service_report_counts_errors_as_requests_and_names_the_first():
    bench = ServiceBench(clients=4, seconds=2.0, latencies_ms=[1.0, 2.0, 3.0, 4.0], errors=2, first_error="HTTP 500")
    lines = bench.lines()
    assert lines[0] == "clients: 4, duration: 2.0 s, requests: 6"
    assert lines[1] == "throughput: 3 requests/s"
    assert lines[2].startswith("latency: p50 2.5 ms") and lines[2].endswith("max 4.0 ms")
    assert lines[3] == "errors: 2 (first: HTTP 500)"
    assert ServiceBench(clients=1, seconds=1.0).lines()[3] == "errors: 0"


def test_asktell_report_says_whether_the_study_finished():
    bench = AsktellBench(clients=2, planned=10, seconds=2.0, round_trips_ms=[10.0, 20.0, 30.0, 40.0], finished=False)
    lines = bench.lines()
    assert lines[0].startswith("clients: 2, trials: 4 of 10 (stopped by the time bound)")
    assert "round trips: 2/s" in lines[1] and "p50 25.0 ms" in lines[1]
    bench.finished = True
    assert "(study finished)" in bench.lines()[0]
    bench.local = {"sqlite": 0.25}  # the service took 2.0 s / 4 trials = 500 ms a trial
    assert bench.lines()[3] == "service: 500.00 ms of wall time per trial"
    assert bench.lines()[4] == "in-process loop (sqlite): 250.00 ms per trial; service overhead +250.00 ms per trial"


def test_asktell_objective_peaks_at_its_optimum_profile_and_the_study_is_well_formed():
    optimum = np.repeat((np.linspace(1.5, 0.5, LAYERS) * TARGET)[:, None], 3, axis=1)
    assert objective(optimum) == pytest.approx(1.0)
    assert objective(np.full((LAYERS, 3), TARGET)) < 1.0
    body = study_body(generations=3, seed=7)
    assert body["geometry"] == {"num_layers": LAYERS, "num_kv_heads": 3}
    assert body["optimizer"] == {"generations": 3, "seed": 7}
