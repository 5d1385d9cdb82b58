"""``search RECIPE --plan``: the counts are exact, the measured and estimated figures are labelled, nothing is
written."""

from __future__ import annotations

from evolalloc.config.recipe import load_recipe
from evolalloc.pipeline.expansion import SEARCHED_RULES
from evolalloc.pipeline.experiment import Experiment
from evolalloc.pipeline.plan import count_run
from tests.clitools import run_cli
from tests.pipeline.test_pipeline import tiny_recipe


def test_the_plan_prints_counts_measurements_and_estimates_and_writes_nothing(tmp_path, tiny_model_dir):
    recipe = tiny_recipe(tmp_path, tiny_model_dir)
    result = run_cli("search", recipe, "--plan", "--runs-dir", tmp_path / "runs", "--set", "engine.threads=1",
                     "--set", "optimizer.start=uniform")
    assert result.code == 0, result.stderr
    text = result.stdout
    assert not (tmp_path / "runs").exists()
    # 2 groups of 2 layers, 2 generations of EvolKV's 4 + floor(3 ln 2) = 6: 24 candidates on the 2 search instances.
    assert "prefills: 5 = 2 passkey search + 3 passkey heldout" in text
    assert ("1 search(es) x 24 candidates (2 groups: generations x "
            "population = 2 x 6 + 2 x 6), each on 2 search instances") in text
    # evolved + uniform, pyramid, streaming (the default baselines) at c = 24 and its expansion 48.
    assert "+ 8 held-out evaluations (methods x budgets) on 3 instances" in text
    assert "with the full cache" not in text  # neither curated nor a full row: not timed
    assert "b_max: 192" in text  # 4 x the largest budget, 48
    for label in ("COUNTED (exact", "MEASURED (4 drawn search instances", "ESTIMATED memory", "ESTIMATED time",
                  "total: about"):
        assert label in text, label


def test_the_plan_counts_a_converging_search_by_its_cap_and_the_start_and_says_so(tmp_path, tiny_model_dir):
    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, optimizer={
        "name": "cma", "generations_per_group": None, "max_generations_per_group": 5, "start": "uniform,pyramid"}))
    with Experiment(recipe, progress=False) as experiment:
        counts = count_run(recipe, experiment)
    # the start's 2 profiles, then 2 groups x at most 5 generations x 6 candidates
    assert (counts.start_candidates, counts.generations, counts.converging) == (2, 5, True)
    assert counts.evaluations_per_search == 2 + 2 * 5 * 6
    result = run_cli("search", tiny_recipe(tmp_path, tiny_model_dir), "--plan", "--runs-dir", tmp_path / "runs",
                     "--set", "engine.threads=1", "--set", "optimizer.generations_per_group=null")
    assert result.code == 0, result.stderr
    assert "at most — each group stops when it has converged, the counts are its cap of 20" in result.stdout
    assert "search (every group to its cap: an upper figure)" in result.stdout

def test_the_plan_counts_every_pass_over_the_groups(tmp_path, tiny_model_dir):
    result = run_cli("search", tiny_recipe(tmp_path, tiny_model_dir), "--plan", "--runs-dir", tmp_path / "runs",
                     "--set", "engine.threads=1", "--set", "optimizer.start=uniform", "--set", "optimizer.passes=2")
    assert result.code == 0, result.stderr
    assert ("1 search(es) x 48 candidates (4 groups = 2 passes over 2: generations x "
            "population = 2 x 6 + 2 x 6 + 2 x 6 + 2 x 6)") in result.stdout


def test_curated_draws_are_prefilled_whole_and_the_search_rule_adds_expansion_candidates(tmp_path, tiny_model_dir):
    path = tiny_recipe(tmp_path, tiny_model_dir,
                       task={"name": "passkey", "context_tokens": 200, "heldout": {"n": 3},
                             "search": {"n": 2,
                                        "curate": {"full_cache_solves": True, "reference_unsolved": None, "draw": 5}}},
                       budget={"target": 24, "expansions": [48, 96], "expansion_rule": "search"},
                       optimizer={"name": "cma", "generations_per_group": 2, "start": "uniform"})
    recipe = load_recipe(path)
    with Experiment(recipe, progress=False) as experiment:
        counts = count_run(recipe, experiment)
    assert counts.prefills == {"passkey search (curated: 5 drawn for 2)": 5, "passkey heldout": 3}
    assert counts.whole_records == 5 and counts.search_instances == 2 and counts.heldout_instances == 3
    assert counts.expansion_candidates == 2 * len(SEARCHED_RULES)
    assert counts.compare_evaluations == 4 * 3 and counts.b_max == 4 * 96
    assert not experiment.run.model.is_loaded  # counting needs the model's config, not its weights


def test_lukv_prefills_each_search_prompt_again_only_under_bounded_records(tmp_path, tiny_model_dir):
    for baselines, bound, start, forwards in ((["uniform"], {}, "uniform", 0),
                                              (["uniform", "lukv"], {}, "uniform", 2),
                                              (["uniform"], {}, "best", 2),  # the start profiles LU-KV
                                              (["uniform", "lukv"], {"target": 100, "expansions": []}, "uniform", 0)):
        budget = bound or {"target": 24, "expansions": [48]}
        recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, baselines=baselines, budget=budget,
                                         optimizer={"name": "cma", "generations_per_group": 2, "start": start}))
        with Experiment(recipe, progress=False) as experiment:
            counts = count_run(recipe, experiment)
        lukv = {what: n for what, n in counts.prefills.items() if what.startswith("LU-KV")}
        # 2 search prompts of 200 tokens: bounded at b_max 192 (c 24, 48) they are prefilled again whole; at c 100
        # (b_max 400) the records are whole and the answers are fed over them: no prompt-length forward
        assert sum(lukv.values()) == forwards, (baselines, budget, lukv)


def test_a_recipe_the_model_cannot_hold_is_refused_by_the_plan_as_by_the_run(tmp_path, tiny_model_dir):
    recipe = tiny_recipe(tmp_path, tiny_model_dir,
                         task={"name": "passkey", "context_tokens": 4000, "search": {"n": 2}, "heldout": {"n": 3}})
    result = run_cli("search", recipe, "--plan", "--runs-dir", tmp_path / "runs")
    assert result.code == 2 and len(result.error_lines) == 1
    assert "4000 tokens do not fit the model's 2048 positions" in result.error_lines[0]
    assert not (tmp_path / "runs").exists()


def test_the_comparison_is_timed_at_each_of_its_budgets_and_the_full_cache_once_and_curation_with_the_full_cache():
    from evolalloc.core.geometry import ModelGeometry
    from evolalloc.pipeline.plan import Calibration, Counts, RunPlan

    counts = Counts(search_instances=16, heldout_instances=64, prefills={"x": 1}, whole_records=20, searches=1,
                    evaluations_per_search=78, groups=[8], generations=2, popsizes=[10], expansion_candidates=0,
                    compare_budgets=[512, 1024, 2048], compressed_methods=11, full_rows=1,
                    b_max=8192)
    calibration = Calibration(prompt_tokens=8160, load_seconds=1.0, prefill_seconds=30.0, search_row_seconds=0.05,
                              generate_by_budget={512: 0.1, 1024: 0.2, 2048: 0.4},
                              full_row_seconds=2.0, record_bytes_whole=1, record_bytes_bounded=1)
    geometry = ModelGeometry(num_layers=30, num_query_heads=9, num_kv_heads=3, head_dim=64, max_positions=8192)
    plan = RunPlan(name="r", model="m", dtype="float32", geometry=geometry, context="8160", record_dtype="float32",
                   record_memory=None, counts=counts, calibration=calibration)
    seconds = plan.seconds()
    # 11 compressed methods at 512, 1024 and 2048, and the full cache once (not once per budget)
    assert abs(seconds["held-out comparison"] - 64 * (11 * (0.1 + 0.2 + 0.4) + 2.0)) < 1e-9
    assert seconds["curation (full-cache judgment of the drawn)"] == 20 * 2.0  # the judgment keeps every token
    assert plan.comparison_upper() is None  # no answer lengths measured: no upper figure

    # The calibration batches' longest answers: 4 tokens at 512, 32 (the most) at the larger budgets, 8 with
    # the full cache.
    calibration.answer_tokens, calibration.max_new_tokens = {512: 4.0, 1024: 32.0, 2048: 32.0, None: 8.0}, 32
    assert abs(plan.comparison_upper() - 64 * (11 * (0.1 * 8 + 0.2 + 0.4) + 2.0 * 4)) < 1e-9
    lines = "\n".join(plan.lines())
    assert "(up to 25 min if every batch's longest answer runs to 32 tokens" in lines

    # In batches of 16 rows, 64 rows are 4 full batches; 70 cost 5 (the last one partly empty).
    calibration.batch_rows = 16
    assert plan.padded(64) == 64 and plan.padded(70) == 80 and plan.padded(0) == 0
    # A method's three budgets on 70 instances are one evaluation of 210 rows: 14 batches, 224 rows;
    # the full cache's 70 rows cost 80.
    counts.heldout_instances = 70
    assert abs(plan.seconds()["held-out comparison"] - (11 * 70 * 224 / 210 * (0.1 + 0.2 + 0.4) + 80 * 2.0)) < 1e-9
    # A search generation's 10 candidates on 16 instances are one evaluation: 160 rows, 10 batches.
    assert abs(plan.seconds()["search"] - 2 * 160 * 0.05) < 1e-9


def test_the_plan_prints_a_generate_row_at_each_budget_and_with_the_full_cache(tmp_path, tiny_model_dir):
    recipe = tiny_recipe(tmp_path, tiny_model_dir, baselines=["uniform", "full"])
    result = run_cli("search", recipe, "--plan", "--runs-dir", tmp_path / "runs", "--set", "engine.threads=1")
    assert result.code == 0, result.stderr
    # evolved + uniform + full at 24 and 48, the full cache's once: 2 x 2 + 1
    text = result.stdout
    assert "+ 5 held-out evaluations (methods x budgets, the full cache's once: the same at every budget)" in text
    measured = next(line for line in result.stdout.splitlines() if line.startswith("MEASURED"))
    assert " s at 24, " in measured and " s at 48 and " in measured and " s with the full cache" in measured


def test_records_that_spill_are_calibrated_spilled_and_read_cold_when_memory_cannot_cache_them(
        tmp_path, tiny_model_dir, monkeypatch):
    from evolalloc.pipeline import plan_calibration as plan

    recipe = tiny_recipe(tmp_path, tiny_model_dir, baselines=["uniform", "full"])
    ran = []
    real = plan.cold_read
    monkeypatch.setattr(plan, "cold_read", lambda records: ran.append(len(records)) or real(records))
    result = run_cli("search", recipe, "--plan", "--runs-dir", tmp_path / "runs", "--set", "engine.threads=1",
                     "--set", "engine.record_memory=1KB")
    assert result.code == 0, result.stderr
    note = next(line for line in result.stdout.splitlines() if "records spill to disk" in line)
    assert "calibrated on spilled records; the search split's" in note and "the held-out split's" in note
    assert note.count("timed as read from the page cache") == 2 and "from disk" not in note
    assert not ran  # this machine has the memory to cache a few KB: no cold read

    monkeypatch.setattr(plan, "available_memory", lambda: 0)
    result = run_cli("search", recipe, "--plan", "--runs-dir", tmp_path / "runs", "--set", "engine.threads=1",
                     "--set", "engine.record_memory=1KB")
    assert result.code == 0, result.stderr
    assert result.stdout.count("timed as read from disk (dropped from the page cache before each timed batch)") == 2
    # every timed batch, none of the warm-ups: 2 budgets and the full cache (generate), and the search's mode
    assert ran == [4] * 4  # the 4 distinct records, before each
    assert not (tmp_path / "runs").exists()


def test_spilled_records_read_over_and_over_stay_cached_up_to_half_the_memory_left_and_are_read_from_disk_beyond_it():
    from evolalloc.pipeline.plan_calibration import read_mode

    assert [read_mode(spilled, 20) for spilled in (0, 10, 11, 20, 21)] == ["cached", "cached", "either", "either",
                                                                           "disk"]


def test_where_records_may_not_stay_cached_the_upper_figure_reads_them_from_disk():
    from evolalloc.core.geometry import ModelGeometry
    from evolalloc.pipeline.plan import Calibration, Counts, RunPlan

    counts = Counts(search_instances=16, heldout_instances=100, prefills={"x": 1}, whole_records=0, searches=1,
                    evaluations_per_search=78, groups=[8], generations=2, popsizes=[10], expansion_candidates=0,
                    compare_budgets=[128, 256], compressed_methods=9, full_rows=1, b_max=8192)
    calibration = Calibration(prompt_tokens=4096, load_seconds=1.0, prefill_seconds=10.0, search_row_seconds=0.01,
                              generate_by_budget={128: 0.1, 256: 0.2}, full_row_seconds=0.5, record_bytes_whole=1,
                              record_bytes_bounded=1, answer_tokens={128: 20.0, 256: 20.0, None: 20.0},
                              max_new_tokens=20, batch_rows=8)
    geometry = ModelGeometry(num_layers=30, num_query_heads=9, num_kv_heads=3, head_dim=64, max_positions=8192)
    plan = RunPlan(name="r", model="m", dtype="float32", geometry=geometry, context="4096", record_dtype="float32",
                   record_memory=None, counts=counts, calibration=calibration)
    assert plan.comparison_upper() == plan.seconds()["held-out comparison"]  # every answer already ran to 20
    calibration.generate_cold_by_budget, calibration.full_row_cold_seconds = {128: 0.15, 256: 0.3}, 0.6
    # 9 methods x (2 budgets x 100 prompts: 25 full batches of 8) + the full cache's 100 rows (13 batches: 104)
    assert abs(plan.comparison_upper() - (9 * 100 * (0.15 + 0.3) + 104 * 0.6)) < 1e-9
    assert "its records are read from disk each time" in "\n".join(plan.lines())


def test_a_run_that_trains_its_scorer_is_planned_at_the_search_bound_without_its_weights(tmp_path, tiny_model_dir):
    # The baselines' budgets need the trained scorer, so the plan counts the search's bound alone: 4 x 48.
    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, scorer={"name": "gates", "train": {"steps": 2}}))
    with Experiment(recipe, progress=False) as experiment:
        counts = count_run(recipe, experiment)
        assert counts.b_max == 4 * 48 and "a baseline may raise it" in counts.b_max_note
        assert not experiment.run.model.is_loaded
