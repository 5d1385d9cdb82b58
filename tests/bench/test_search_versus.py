"""benchmarks/search_versus.py: several searches x seeds on one experiment's records, then versus.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from evolalloc.config.run_folder import load_run_recipe
from evolalloc.report.comparison import load_instance_scores
from tests.pipeline.test_pipeline import tiny_recipe

ROOT = Path(__file__).resolve().parents[2]


def script(name: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *map(str, args)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)


def count_reuses(monkeypatch) -> list[bool]:
    """From now on, each ``RecordKeeper.reuse`` call appends whether it found the record on disk."""
    from evolalloc.runtime.record_store import RecordKeeper

    found, original = [], RecordKeeper.reuse

    def counting(self, *args, **kwargs):
        record = original(self, *args, **kwargs)
        found.append(record is not None)
        return record

    monkeypatch.setattr(RecordKeeper, "reuse", counting)
    return found


def test_every_variant_and_seed_gets_a_finished_run_on_the_same_held_out_instances(tmp_path, tiny_model_dir):
    recipe = tiny_recipe(tmp_path, tiny_model_dir, budget={"target": 24, "expansions": []}, baselines=[])
    runs = tmp_path / "runs"
    done = script("search_versus.py", recipe, "--runs-dir", runs, "--prefix", "t", "--seeds", 0, 1, "--no-progress",
                  "--set", "optimizer.generations_per_group=1",
                  "--variant", "knots", "search_space.name=depth_knots search_space.group_size=8 optimizer.popsize=4",
                  "--variant", "random", "optimizer.name=random")
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in runs.iterdir())
    assert names == ["t-knots-s0", "t-knots-s1", "t-random-s0", "t-random-s1"]
    assert load_run_recipe(runs / "t-knots-s1").optimizer.seed == 1
    assert load_run_recipe(runs / "t-knots-s1").search_space.name == "depth_knots"
    assert load_run_recipe(runs / "t-random-s0").optimizer.name == "random"
    uids = {name: set(load_instance_scores(runs / name / "comparison.json")["passkey"]["evolved"][24.0])
            for name in names}
    assert len({frozenset(u) for u in uids.values()}) == 1 and len(uids["t-knots-s0"]) == 3
    # the start's 3 (uniform, PyramidKV, LU-KV), then knots: one group of 4 (4 layers = 4 knots) x 1 generation
    # x popsize 4; random: 2 groups x 1 x 6.
    assert "t-knots-s0: 7 evaluations" in done.stdout and "t-random-s0: 15 evaluations" in done.stdout
    pooled = script("versus.py", runs / "t-knots-s0", runs / "t-knots-s1", "--versus", runs / "t-random-s0",
                    runs / "t-random-s1")
    assert pooled.returncode == 0 and "pooled:" in pooled.stdout and pooled.stdout.count(" vs ") == 4
    again = script("search_versus.py", recipe, "--runs-dir", runs, "--prefix", "t", "--seeds", 0, "--no-progress",
                   "--set", "optimizer.generations_per_group=1", "--variant", "random", "optimizer.name=random")
    assert again.returncode == 0 and "evaluations" not in again.stdout  # finished runs are re-used, not run again


def test_a_variant_that_changes_the_instances_is_refused_in_one_line(tmp_path, tiny_model_dir):
    recipe = tiny_recipe(tmp_path, tiny_model_dir)
    done = script("search_versus.py", recipe, "--runs-dir", tmp_path / "runs", "--prefix", "t",
                  "--variant", "more", "task.search.n=5")
    assert done.returncode == 2 and "may change only" in done.stderr and "task" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()


def test_variants_of_other_budgets_share_one_prefill_and_ship_their_own_targets(tmp_path, tiny_model_dir):
    recipe = tiny_recipe(tmp_path, tiny_model_dir, budget={"target": 24, "expansions": []}, baselines=[])
    runs = tmp_path / "runs"
    done = script("search_versus.py", recipe, "--runs-dir", runs, "--prefix", "b", "--seeds", 0, "--no-progress",
                  "--set", "optimizer.generations_per_group=1", "--set", "budget.target=24",
                  "--variant", "at12", "budget.target=12", "--variant", "at24", "optimizer.name=cma")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (runs / "b-at12-s0").glob("allocation-c*.json")) == ["allocation-c12.json"]
    assert sorted(p.name for p in (runs / "b-at24-s0").glob("allocation-c*.json")) == ["allocation-c24.json"]
    assert load_run_recipe(runs / "b-at12-s0").budget.target == 12


def test_a_variant_above_the_shared_budgets_is_refused_in_one_line(tmp_path, tiny_model_dir):
    recipe = tiny_recipe(tmp_path, tiny_model_dir, budget={"target": 24, "expansions": []}, baselines=[])
    done = script("search_versus.py", recipe, "--runs-dir", tmp_path / "runs", "--prefix", "t",
                  "--variant", "more", "budget.target=48")
    assert done.returncode == 2 and "above the shared recipe's largest (24)" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()


def test_held_in_scores_each_profile_on_other_search_instances_without_a_held_out_comparison(tmp_path, tiny_model_dir):
    recipe = tiny_recipe(tmp_path, tiny_model_dir, budget={"target": 24, "expansions": []}, baselines=[])
    runs = tmp_path / "runs"
    done = script("search_versus.py", recipe, "--runs-dir", runs, "--prefix", "h", "--seeds", 0, "--no-progress",
                  "--held-in", 5, 4, "--set", "optimizer.generations_per_group=1",
                  "--variant", "cma", "optimizer.popsize=4", "--variant", "random", "optimizer.name=random")
    assert done.returncode == 0, done.stderr
    held = json.loads((runs / "h-held-in.json").read_text())
    assert set(held["scores"]) == {"h-cma-s0", "h-random-s0"} and all(len(s) == 4 for s in held["scores"].values())
    assert not (runs / "h-cma-s0" / "comparison.json").exists()  # the held-out split was not touched
    # The same searches, now finished on the held-out split: the stored trials are replayed, not re-evaluated.
    finished = script("search_versus.py", recipe, "--runs-dir", runs, "--prefix", "h", "--seeds", 0, "--no-progress",
                      "--set", "optimizer.generations_per_group=1",
                      "--variant", "cma", "optimizer.popsize=4", "--variant", "random", "optimizer.name=random")
    assert finished.returncode == 0, finished.stderr
    assert (runs / "h-cma-s0" / "comparison.json").exists() and (runs / "h-random-s0" / "report.md").exists()
    assert "h-cma-s0: 11 evaluations (0 new)" in finished.stdout  # the start's 3 + 2 groups x 1 x 4, replayed


def test_rule_search_expansions_are_scored_on_one_search_prefill_for_every_run(tmp_path, tiny_model_dir, monkeypatch):
    """Each run's expansions are chosen on the search split (rule ``search``), and the split is
    prefilled once for all runs: not again after the first run's ``ship_and_compare`` released it."""
    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.pipeline.task_splits import TaskSplits
    from tests.report.test_design_scores import benchmark_script

    prefilled = []
    original = TaskSplits.records

    def counting(self, split):
        if split not in self.records_of:
            prefilled.append(split)
        return original(self, split)

    monkeypatch.setattr(TaskSplits, "records", counting)
    recipe = tiny_recipe(tmp_path, tiny_model_dir,
                         budget={"target": 24, "expansions": [32], "expansion_rule": "search"},
                         baselines=[])
    runs = tmp_path / "runs"
    code = benchmark_script("search_versus").main([str(recipe), "--runs-dir", str(runs), "--prefix", "x", "--seeds",
                                                   "0", "1",
                                                   "--no-progress", "--set", "optimizer.generations_per_group=1",
                                                   "--variant", "random", "optimizer.name=random"])
    assert code == 0
    assert prefilled.count("search") == 1 and prefilled.count("heldout") == 1
    for seed in (0, 1):
        shipped = load_allocation(runs / f"x-random-s{seed}" / "allocation-c32.json")
        # the rules, and the search's start methods at that budget
        assert set(shipped.provenance["expansion_search_scores"]) == {"proportional", "additive", "start:uniform",
                                                                      "start:pyramid", "start:lukv"}
        assert (runs / f"x-random-s{seed}" / "comparison.json").exists()


def test_run_again_after_a_kill_in_the_comparison_the_held_out_records_are_read_back_not_prefilled(
        tmp_path, tiny_model_dir, monkeypatch):
    """Killed after the shared held-out prefill (every record spilled to the last run folder's
    ``records/``): the second call finds them there instead of prefilling the split again."""
    import pytest

    import evolalloc.pipeline.run as run_module
    from tests.report.test_design_scores import benchmark_script

    recipe = tiny_recipe(tmp_path, tiny_model_dir, budget={"target": 24, "expansions": []}, baselines=[],
                         engine={"kind": "local", "threads": 1, "batch_size": 8, "record_memory": "0B",
                                 "keep_records": True})
    runs = tmp_path / "runs"
    argv = [str(recipe), "--runs-dir", str(runs), "--prefix", "k", "--seeds", "0", "1", "--no-progress",
            "--set", "optimizer.generations_per_group=1", "--variant", "random", "optimizer.name=random"]

    def killed(*args, **kwargs):
        raise RuntimeError("killed in the comparison")

    with monkeypatch.context() as patch:
        patch.setattr(run_module, "ship_and_compare", killed)
        with pytest.raises(RuntimeError, match="killed"):
            benchmark_script("search_versus").main(argv)
    assert len(list((runs / "k-random-s1" / "records").iterdir())) >= 3  # the held-out split, spilled

    found = count_reuses(monkeypatch)
    assert benchmark_script("search_versus").main(argv) == 0
    assert found and all(found)  # every record asked for was read back from the first call's files
    assert (runs / "k-random-s0" / "comparison.json").exists() and (runs / "k-random-s1" / "comparison.json").exists()


def test_compare_once_scores_every_run_and_every_row_once_on_the_same_prompts(tmp_path, tiny_model_dir):
    recipe = tiny_recipe(tmp_path, tiny_model_dir, budget={"target": 24, "expansions": [48]},
                         baselines=["uniform", "pyramid", "full"])
    out = tmp_path / "scores.json"
    done = script("search_versus.py", recipe, "--runs-dir", tmp_path / "runs", "--prefix", "t", "--seeds", 0,
                  "--no-progress", "--set", "optimizer.generations_per_group=1",
                  "--variant", "uniform", "optimizer.start=uniform", "--variant", "best", "optimizer.start=best",
                  "--compare-once", out)
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert set(data["scores"]) == {"t-uniform-s0", "t-best-s0", "uniform", "pyramid", "full"}
    uids = {frozenset(per) for row in data["scores"].values() for per in row.values()}
    assert len(uids) == 1 and len(next(iter(uids))) == 3  # every row on the same 3 held-out prompts
    assert set(data["scores"]["uniform"]) == {"24.0", "48.0"}
    assert data["runs"]["t-uniform-s0"]["start"] == "uniform" and data["runs"]["t-uniform-s0"]["start_scores"] == {}
    assert set(data["runs"]["t-best-s0"]["start_scores"]) >= {"uniform", "pyramid"}
    assert not (tmp_path / "runs" / "t-best-s0" / "comparison.json").exists()  # one comparison, not one per run
    assert "greedy_prefix_by_mode" not in data  # passkey's answers are not judged against the full cache


def test_compare_once_in_the_agreement_mode_at_chosen_budgets_keeps_both_scores_of_each_answer(tmp_path,
                                                                                                  tiny_model_dir):
    """``--compare-modes agreement,fidelity --compare-budgets 24``: every row at c only; the table's scores are
    the answers' agreement with the full cache's continuation (the full cache's own: 1), the task's own score
    of the same answers and the likelihood kept beside them."""
    recipe = tiny_recipe(tmp_path, tiny_model_dir, budget={"target": 24, "expansions": [48]},
                         baselines=["uniform", "full"])
    out = tmp_path / "scores.json"
    common = ["--runs-dir", tmp_path / "runs", "--prefix", "t", "--seeds", 0, "--no-progress",
              "--set", "optimizer.generations_per_group=1", "--variant", "best", "optimizer.start=best"]
    refused = script("search_versus.py", recipe, *common, "--compare-once", out, "--compare-budgets", 30)
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        "error: --compare-budgets: takes --compare-once and budgets of the run (24, 48)"]
    refused = script("search_versus.py", recipe, *common, "--compare-once", out, "--compare-modes", "agreement,fidelty")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert refused.stderr.startswith("error: --compare-modes: fidelty: not a mode; valid: generate, graded")
    assert not (tmp_path / "runs").exists()
    done = script("search_versus.py", recipe, *common, "--compare-once", out, "--compare-budgets", 24,
                  "--compare-modes", "agreement,fidelity")
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["budgets"] == [24.0] and data["modes"] == ["agreement", "fidelity"]
    assert all(set(per) == {"24.0"} for per in data["scores"].values())
    assert set(data["scores"]["full"]["24.0"].values()) == {1.0}
    assert set(data["greedy_prefix_by_mode"]["agreement"]["full"]["24.0"].values()) == {1.0}
    assert set(data["metrics_by_mode"]) == {"agreement", "fidelity"}
    assert set(data["metrics_by_mode"]["agreement"]["full"]["24.0"]) == set(data["scores"]["full"]["24.0"])


def test_variants_searched_in_two_processes_are_replayed_not_searched_again_by_the_comparing_call(tmp_path,
                                                                                                  tiny_model_dir):
    recipe = tiny_recipe(tmp_path, tiny_model_dir, budget={"target": 24, "expansions": []},
                         baselines=["uniform"])
    runs, common = tmp_path / "runs", ["--prefix", "t", "--seeds", 0, "--no-progress",
                                       "--set", "optimizer.generations_per_group=1"]
    variants = {"uniform": "optimizer.start=uniform", "best": "optimizer.start=best"}
    first = {}
    for name, sets in variants.items():  # one process per variant, as the runbook runs them side by side
        done = script("search_versus.py", recipe, "--runs-dir", runs, *common, "--variant", name, sets,
                      "--search-only")
        assert done.returncode == 0, done.stderr
        first[name] = next(line for line in done.stdout.splitlines() if line.startswith(f"t-{name}-s0:"))
        assert " new)" in first[name] and "(0 new)" not in first[name]
    assert not any((runs / f"t-{name}-s0" / "allocation-c24.json").exists() for name in variants)  # not shipped
    out = tmp_path / "scores.json"
    done = script("search_versus.py", recipe, "--runs-dir", runs, *common,
                  *[arg for name, sets in variants.items() for arg in ("--variant", name, sets)],
                  "--compare-once", out)
    assert done.returncode == 0, done.stderr
    for name in variants:  # the stored searches replayed: the same evaluations and best fitness, none new
        again = next(line for line in done.stdout.splitlines() if line.startswith(f"t-{name}-s0:"))
        assert "(0 new)" in again
        assert again.split(" evaluations")[0] == first[name].split(" evaluations")[0]
        assert again.split("best search fitness")[1] == first[name].split("best search fitness")[1]
    assert set(json.loads(out.read_text())["scores"]) == {"t-uniform-s0", "t-best-s0", "uniform"}


def test_the_held_out_prefill_from_the_end_is_read_back_by_the_comparing_call(tmp_path, tiny_model_dir, monkeypatch):
    """Two cores on one held-out prefill: a call with --prefill-from-end writes the held-out records
    backwards until it meets ones on disk (skipping those at the end an earlier run of it made); the
    comparing call then prefills none of them."""
    from tests.report.test_design_scores import benchmark_script

    recipe = tiny_recipe(tmp_path, tiny_model_dir, budget={"target": 24, "expansions": []}, baselines=["uniform"],
                         engine={"kind": "local", "threads": 1, "batch_size": 8, "record_memory": "0B"})
    runs = tmp_path / "runs"
    argv = [str(recipe), "--runs-dir", str(runs), "--prefix", "p", "--seeds", "0", "--no-progress",
            "--set", "optimizer.generations_per_group=1", "--variant", "random", "optimizer.name=random"]
    script_main = benchmark_script("search_versus").main
    assert script_main(argv + ["--prefill-from-end"]) == 2  # refused before the searches have run folders
    assert script_main(argv + ["--search-only"]) == 0
    folder = runs / "p-random-s0" / "records"
    searched = set(folder.iterdir()) if folder.exists() else set()  # the search split's went with its process
    assert script_main(argv + ["--prefill-from-end"]) == 0
    held_out = set(folder.iterdir()) - searched
    assert len(held_out) == 3  # the tiny recipe's held-out prompts, every one
    stamps = {path: path.stat().st_mtime_ns for path in held_out}
    assert script_main(argv + ["--prefill-from-end"]) == 0  # all there: it stops at the last prompt's record
    assert {path: path.stat().st_mtime_ns for path in held_out} == stamps

    # A killed pair resumed: the last prompt's record from the killed call of this one, the first from the
    # comparing call, the middle one missing. Made again, and only it.
    last, middle, first = sorted(held_out, key=lambda path: path.stat().st_mtime_ns)  # made from the end
    middle.unlink()
    assert script_main(argv + ["--prefill-from-end"]) == 0
    assert middle.exists()
    assert (last.stat().st_mtime_ns, first.stat().st_mtime_ns) == (stamps[last], stamps[first])
    stamps[middle] = middle.stat().st_mtime_ns

    found = count_reuses(monkeypatch)
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # compare_once.py, beside the script
    assert script_main(argv + ["--compare-once", str(tmp_path / "scores.json")]) == 0
    assert found.count(True) == 3  # the held-out records read back, not prefilled (the search split's are made again)
    assert not folder.exists()  # the scores are written: the records removed, as a finished run's are
