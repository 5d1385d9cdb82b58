"""The search protocol on the tiny model: split curation (counts, re-use, held-out isolation),
several weighted tasks end to end, and --seeds (one run per seed, a summary, resumable)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from evolalloc.core.errors import UserError
from evolalloc.engine.base import EvalResult, InstanceOutcome
from evolalloc.engine.local import LocalEvaluator

FULL = 1 << 20  # any budget above this is the full cache in the fake below


def base_recipe(model_dir, **changes) -> dict:
    recipe = {
        "name": "tiny",
        "model": {"spec": str(model_dir)},
        "task": {"name": "passkey", "context_tokens": 160, "search": {"n": 2}, "heldout": {"n": 2}},
        "scorer": {"name": "snapkv", "params": {"window": 8}},
        "budget": {"target": 24, "expansions": [48]},
        "search_space": {"name": "layer_groups", "group_size": 4},
        "optimizer": {"name": "cma", "generations_per_group": 1, "popsize": 3},
        "engine": {"kind": "local", "threads": 1, "batch_size": 8},
        "baselines": ["uniform", "pyramid"],
        "seed": 0,
    }
    recipe.update(changes)
    return recipe


def load(tmp_path, data):
    from evolalloc.config.recipe import load_recipe

    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_recipe(path)


def index_of(uid: str) -> int:
    return int(uid.rsplit("/", 1)[1])


@pytest.fixture
def judged(monkeypatch):
    """A fake judge instead of decoding: the full cache solves instances with an even index, any
    compressed cache those with an index divisible by 4. Counts the budgets it was asked about."""
    asked = {"full": 0, "compressed": 0}

    def evaluate(self, budgets):
        results = []
        for b in budgets:
            full = int(np.max(b)) >= FULL
            asked["full" if full else "compressed"] += 1
            solved = (lambda i: i % 2 == 0) if full else (lambda i: i % 4 == 0)
            outcomes = [InstanceOutcome(inst.uid, "", float(solved(index_of(inst.uid))),
                                        float(solved(index_of(inst.uid))))
                        for inst in self.instances]
            results.append(EvalResult(task_score=float(np.mean([o.score for o in outcomes])), instances=outcomes))
        return results

    monkeypatch.setattr(LocalEvaluator, "evaluate", evaluate)
    return asked


def curated(search=None, heldout=None, **task):
    section = {"name": "passkey", "context_tokens": 160, "search": {"n": 2}, "heldout": {"n": 2}, **task}
    if search:
        section["search"] = search
    if heldout:
        section["heldout"] = heldout
    return section


def test_curation_keeps_what_the_full_cache_solves_and_uniform_does_not_and_records_the_counts(tmp_path, tiny_model_dir,
                                                                                               judged):
    from evolalloc.pipeline.experiment import Experiment

    recipe = load(tmp_path, base_recipe(tiny_model_dir, task=curated(
        search={"n": 2, "curate": {"full_cache_solves": True, "reference_unsolved": "uniform", "draw": 8}})))
    experiment = Experiment(recipe, progress=False, curation_file=tmp_path / "curation.json")
    kept = experiment.instances("search")
    assert [index_of(inst.uid) for inst in kept] == [2, 6]  # even (full solves), not divisible by 4 (uniform solves)
    assert judged == {"full": 1, "compressed": 1}
    stored = json.loads((tmp_path / "curation.json").read_text())["tasks"]["passkey"]["search"]
    assert (stored["drawn"], stored["full_cache_solved"], stored["reference_solved"], stored["kept"]) == (8, 4, 2, 2)
    assert stored["reference"] == "uniform" and stored["reference_budget"] == 24
    # the kept instances' prefill records are the drawn ones, not made again
    drawn = {record.uid: record for record in experiment.records("search:drawn")}
    assert all(record is drawn[record.uid] for record in experiment.records("search"))


def test_drawn_candidates_are_spilled_and_leave_the_held_memory_to_the_kept_records(tmp_path, tiny_model_dir, judged):
    """Curation's whole drawn records are read once: they spill to the run folder even with memory
    left (issue 22: held records came on top of the batch of whole rows at the job's peak), so
    that memory is left to the kept ones (bounded below their length they are held, see
    tests/runtime/test_spilled_records.py)."""
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.runtime.spill import MappedLayers

    recipe = load(tmp_path, base_recipe(tiny_model_dir,
                                        task=curated(search={"n": 2, "curate": {"full_cache_solves": True, "draw": 6}}),
                                        engine={"kind": "local", "threads": 1, "batch_size": 8,
                                                "record_memory": "1GiB"}))
    experiment = Experiment(recipe, progress=False, curation_file=tmp_path / "run" / "curation.json")
    drawn = experiment.records("search:drawn")
    assert all(isinstance(r.keys, MappedLayers) for r in drawn) and experiment.keeper.held == 0
    assert len(list((tmp_path / "run" / "records").glob("*.safetensors"))) == 6
    kept = experiment.records("search")
    assert [index_of(r.uid) for r in kept] == [0, 2]
    # These short prompts fit under b_max: the kept records are the spilled drawn ones, not copies.
    by_uid = {r.uid: r for r in drawn}
    assert all(r is by_uid[r.uid] for r in kept) and experiment.keeper.held == 0
    experiment.close()


def test_a_stored_curation_is_reused_without_judging_again(tmp_path, tiny_model_dir, judged):
    from evolalloc.pipeline.experiment import Experiment

    recipe = load(tmp_path, base_recipe(tiny_model_dir, task=curated(
        search={"n": 3, "curate": {"full_cache_solves": True, "draw": 8}})))
    first = [i.uid for i in Experiment(recipe, progress=False, curation_file=tmp_path / "c.json").instances("search")]
    judged.update(full=0, compressed=0)
    again = Experiment(recipe, progress=False, curation_file=tmp_path / "c.json")
    assert [i.uid for i in again.instances("search")] == first and judged == {"full": 0, "compressed": 0}
    # a recipe with other curation rules does not silently take the stored choice
    other = load(tmp_path, base_recipe(tiny_model_dir,
                                       task=curated(search={"n": 3, "curate": {"full_cache_solves": True, "draw": 9}})))
    with pytest.raises(UserError, match="other rules"):
        Experiment(other, progress=False, curation_file=tmp_path / "c.json").instances("search")


def test_fewer_kept_than_wanted_is_reported_and_none_kept_is_a_user_error(tmp_path, tiny_model_dir, judged, capsys):
    from evolalloc.pipeline.experiment import Experiment

    recipe = load(tmp_path, base_recipe(tiny_model_dir, task=curated(
        search={"n": 4, "curate": {"full_cache_solves": True, "reference_unsolved": "uniform", "draw": 6}})))
    experiment = Experiment(recipe, progress=False)
    assert [index_of(i.uid) for i in experiment.instances("search")] == [2]
    assert "kept 1 (wanted 4) — FEWER than wanted" in capsys.readouterr().out
    nothing = load(tmp_path, base_recipe(tiny_model_dir, task=curated(
        search={"n": 1, "curate": {"full_cache_solves": True, "reference_unsolved": "uniform", "draw": 2}})))
    with pytest.raises(UserError, match="kept no instance") as info:
        Experiment(nothing, progress=False).instances("search")
    assert info.value.field == "task.search.curate"


def test_curation_never_lets_a_held_out_instance_into_the_search_split(tmp_path, tiny_model_dir, judged):
    """However many candidates are drawn and whatever is kept, the search split holds only
    instances that the task's split mechanism assigns to "search", none of the held-out ones."""
    from evolalloc.pipeline.experiment import Experiment
    from fitness.splits import split_of

    recipe = load(tmp_path, base_recipe(tiny_model_dir, task=curated(
        search={"n": 12, "curate": {"full_cache_solves": True, "draw": 24}},
        heldout={"n": 12, "curate": {"full_cache_solves": True, "draw": 24}})))
    experiment = Experiment(recipe, progress=False)
    search, heldout = experiment.instances("search"), experiment.instances("heldout")
    drawn_heldout = experiment.instances("heldout:drawn")
    assert len(search) == len(heldout) == 12

    def keys(instances):
        return {inst.references[0] for inst in instances}  # a passkey's identity is its key

    assert not keys(search) & keys(drawn_heldout)
    assert not {i.prompt for i in search} & {i.prompt for i in drawn_heldout}
    assert all(inst.split == "search" and split_of(inst.references[0]) == "search" for inst in search)
    assert all(inst.split == "heldout" and split_of(inst.references[0]) == "heldout" for inst in heldout)
    # the held-out filter is the full cache alone: the same for every method
    assert [index_of(i.uid) % 2 for i in heldout] == [0] * 12


def test_several_tasks_run_end_to_end_with_per_task_and_overall_rows(tmp_path, tiny_model_dir):
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.pipeline.run import search_run

    data = base_recipe(tiny_model_dir)
    del data["task"]
    data["tasks"] = [
        {"name": "passkey", "weight": 3, "context_tokens": 160, "search": {"n": 2}, "heldout": {"n": 2}},
        {"name": "niah_single", "label": "words", "params": {"needle_type": "word"}, "context_tokens": 160,
         "search": {"n": 1}, "heldout": {"n": 3}},
    ]
    recipe = load(tmp_path, data)
    run = create_run_folder(recipe, tmp_path / "runs")
    search_run(run, recipe, progress=False)
    document = json.loads((run / "comparison.json").read_text())
    tasks = {(row["task"], row["method"], row["budget"]): row for row in document["rows"]}
    assert {t for t, _, _ in tasks} == {"overall", "passkey", "words"}
    assert tasks[("words", "evolved", 24.0)]["score"]["n"] == 3 and tasks[("overall", "evolved",
                                                                           24.0)]["score"]["n"] == 5
    for method in ("evolved", "uniform", "pyramid"):
        for budget in (24.0, 48.0):
            overall = (3 * tasks[("passkey", method, budget)]["score"]["mean"] + tasks[("words", method,
                                                                                        budget)]["score"]["mean"]) / 4
            assert tasks[("overall", method, budget)]["score"]["mean"] == pytest.approx(overall)
    assert document["meta"]["instances"] == {"passkey": 2, "words": 3}
    report = (run / "report.md").read_text()
    assert "### Task passkey" in report and "### Task words" in report and "words: task" in report


def test_the_weighted_fitness_is_the_weighted_mean_of_the_task_scores():
    from evolalloc.engine.weighted import WeightedEvaluator

    class Fixed:
        def __init__(self, score, error=None):
            self.score, self.error = score, error

        def evaluate(self, budgets):
            return [EvalResult(task_score=None if self.error else self.score, error=self.error,
                               instances=[InstanceOutcome("u0", "", self.score, self.score)]) for _ in budgets]

    combined = WeightedEvaluator([("a", 2.0, Fixed(0.9)), ("b", 1.0, Fixed(0.3))]).evaluate([np.ones((2, 1))] * 2)
    assert [r.task_score for r in combined] == pytest.approx([0.7, 0.7])
    assert combined[0].task_scores == {"a": 0.9, "b": 0.3}
    assert [o.uid for o in combined[0].instances] == ["a/u0", "b/u0"]
    failed = WeightedEvaluator([("a", 1.0, Fixed(0.9)),
                                ("b", 1.0, Fixed(0.3, error="boom"))]).evaluate([np.ones((2, 1))])
    assert not failed[0].ok and failed[0].error == "task b: boom"


def test_seeds_run_once_per_seed_on_the_same_instances_and_resume_after_a_kill(tmp_path, tiny_model_dir, monkeypatch):
    from evolalloc.config.run_folder import CHECKPOINT_FILE, load_run_recipe
    from evolalloc.pipeline.seeds import search_seeds

    recipe = load(tmp_path, base_recipe(tiny_model_dir))
    runs = tmp_path / "runs"
    real_evaluate, calls = LocalEvaluator.evaluate, {"n": 0}

    def killed_in_the_second_seeds_search(self, budgets):
        # Seed 0: the start's profiles + one search generation + 3 methods compared = 5 calls; call 6 is
        # seed 1's start.
        calls["n"] += 1
        if calls["n"] == 6:
            raise KeyboardInterrupt
        return real_evaluate(self, budgets)

    monkeypatch.setattr(LocalEvaluator, "evaluate", killed_in_the_second_seeds_search)
    with pytest.raises(KeyboardInterrupt):
        search_seeds(recipe, [0, 1, 2], runs, progress=False, echo=lambda line: None)
    assert (runs / "tiny-s0" / "report.md").exists() and not (runs / "tiny-s1" / "allocation-c24.json").exists()
    assert (runs / "tiny-s1" / CHECKPOINT_FILE).exists() and not (runs / "tiny-s2").exists()

    monkeypatch.setattr(LocalEvaluator, "evaluate", real_evaluate)
    said = []
    folder = search_seeds(recipe, [0, 1, 2], runs, progress=False, echo=said.append)
    assert said == [f"seed 0: finished run {runs / 'tiny-s0'}, re-used", f"seed 1: resuming {runs / 'tiny-s1'}",
                    f"seed 2: new run {runs / 'tiny-s2'}"]
    recipes = [load_run_recipe(runs / f"tiny-s{s}") for s in range(3)]
    assert [r.optimizer.seed for r in recipes] == [0, 1, 2]
    assert all(r.task == recipe.task for r in recipes)  # the instances stay the same
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["seeds"] == [0, 1, 2]
    evolved = next(row for row in summary["rows"] if row["method"] == "evolved" and row["budget"] == 24.0)
    assert set(evolved["per_seed"]) == {"0", "1", "2"}
    assert evolved["mean"] == pytest.approx(np.mean(list(evolved["per_seed"].values())))
    uniform = next(row for row in summary["rows"] if row["method"] == "uniform" and row["budget"] == 24.0)
    assert set(uniform["versus_evolved"]) == {"0", "1", "2"} and "p" in uniform["versus_evolved"]["0"]
    text = (folder / "summary.md").read_text()
    assert "| 24 | evolved |" in text and "c = 24, seed 2:" in text
    assert (folder / "budgets-per-layer.png").stat().st_size > 0  # every seed's profile, uniform and pyramid

    # The profile to ship: the seed with the highest search-split fitness, its files copied unchanged.
    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.pipeline.seeds import pick_by_search_fitness

    fitness = {s: load_allocation(runs / f"tiny-s{s}" / "allocation-c24.json").provenance["fitness"] for s in range(3)}
    picked = max(range(3), key=lambda s: (fitness[s], -s))
    assert summary["pick"]["seed"] == picked
    assert summary["pick"]["search_fitness"] == {str(s): fitness[s] for s in range(3)}
    shipped = sorted(p.name for p in (folder / "best").glob("allocation-c*.json"))
    assert shipped == summary["pick"]["files"] and "allocation-c24.json" in shipped
    for name in shipped:
        assert (folder / "best" / name).read_bytes() == (runs / f"tiny-s{picked}" / name).read_bytes()
    assert f"Seed {picked}: the highest search-split fitness" in text
    # A run that shipped no profile (failed) is never picked.
    for path in (runs / f"tiny-s{picked}").glob("allocation-c*.json"):
        path.unlink()
    again = pick_by_search_fitness({s: runs / f"tiny-s{s}" for s in range(3)})
    assert again["seed"] != picked and again["search_fitness"][str(picked)] is None


def test_compare_pick_ships_every_seed_and_compares_only_the_fittest_and_resumes_after_a_kill(
        tmp_path, tiny_model_dir, monkeypatch):
    from evolalloc.config.run_folder import COMPARISON_FILE
    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.pipeline.run import run_finished
    from evolalloc.pipeline.seeds import search_seeds
    from evolalloc.pipeline.start import start_run

    recipe = load(tmp_path, base_recipe(tiny_model_dir))
    runs = tmp_path / "runs"
    real_evaluate, calls = LocalEvaluator.evaluate, {"n": 0}

    def killed_in_the_third_seeds_search(self, budgets):
        # Seeds 0 and 1: the start's profiles + one search generation = 2 calls each (nothing compared);
        # call 5 is seed 2's start.
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return real_evaluate(self, budgets)

    monkeypatch.setattr(LocalEvaluator, "evaluate", killed_in_the_third_seeds_search)
    with pytest.raises(KeyboardInterrupt):
        search_seeds(recipe, [0, 1, 2], runs, progress=False, echo=lambda line: None, compare="pick")
    for seed in (0, 1):  # shipped, not compared, no records left behind
        folder = runs / f"tiny-s{seed}"
        assert (folder / "allocation-c24.json").exists() and (folder / "allocation-c48.json").exists()
        assert not (folder / COMPARISON_FILE).exists() and not (folder / "records").exists()
    assert not (runs / "tiny-s2" / "allocation-c24.json").exists()

    monkeypatch.setattr(LocalEvaluator, "evaluate", real_evaluate)
    said = []
    folder = search_seeds(recipe, [0, 1, 2], runs, progress=False, echo=said.append, compare="pick")
    fitness = {s: load_allocation(runs / f"tiny-s{s}" / "allocation-c24.json").provenance["fitness"] for s in range(3)}
    picked = max(range(3), key=lambda s: (fitness[s], -s))
    assert said[:3] == [f"seed 0: searched and shipped {runs / 'tiny-s0'}, re-used",
                        f"seed 1: searched and shipped {runs / 'tiny-s1'}, re-used",
                        f"seed 2: resuming {runs / 'tiny-s2'}"]
    assert said[3].startswith(f"seed {picked}: picked (search-split fitness ")
    assert [run_finished(runs / f"tiny-s{s}") for s in range(3)] == [s == picked for s in range(3)]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["pick"]["seed"] == picked and summary["compared"] == [picked]
    evolved = next(row for row in summary["rows"] if row["method"] == "evolved" and row["budget"] == 24.0)
    assert set(evolved["per_seed"]) == {str(picked)}
    text = (folder / "summary.md").read_text()
    assert text.startswith(f"# Search seeds 0, 1, 2: held-out scores of seed {picked}\n")
    assert "(searched and shipped, not compared: --compare pick)" in text

    # The same command again re-uses everything (nothing evaluated); --compare all then compares the others.
    def nothing_evaluated(self, budgets):
        raise AssertionError("a finished pick evaluated again")

    monkeypatch.setattr(LocalEvaluator, "evaluate", nothing_evaluated)
    said.clear()
    search_seeds(recipe, [0, 1, 2], runs, progress=False, echo=said.append, compare="pick")
    assert said[-1] == f"seed {picked}: picked, compared already"
    monkeypatch.setattr(LocalEvaluator, "evaluate", real_evaluate)
    folder = search_seeds(recipe, [0, 1, 2], runs, progress=False, echo=lambda line: None)
    assert all(run_finished(runs / f"tiny-s{s}") for s in range(3))
    assert json.loads((folder / "summary.json").read_text())["compared"] == [0, 1, 2]

    # The picked run's comparison is the one a plain run of that seed gets: same profiles, same held-out scores.
    from evolalloc.pipeline.seeds import seeded_recipe

    alone = start_run(seeded_recipe(recipe, picked, "alone"), tmp_path / "alone", progress=False).run_dir
    a, b = (load_allocation(folder / "allocation-c24.json") for folder in (alone, runs / f"tiny-s{picked}"))
    assert np.array_equal(a.budgets, b.budgets) and a.provenance["fitness"] == b.provenance["fitness"]
    ours = json.loads((runs / f"tiny-s{picked}" / COMPARISON_FILE).read_text())
    theirs = json.loads((alone / COMPARISON_FILE).read_text())
    assert ours["rows"] == theirs["rows"]


def test_the_pick_is_the_highest_search_fitness_ties_to_the_first_and_never_a_failed_run():
    from evolalloc.pipeline.seeds import highest_fitness

    assert highest_fitness({"0": 0.81, "1": 0.87, "2": 0.85}) == "1"
    assert highest_fitness({"3": 0.5, "1": 0.7, "2": 0.7}) == "1"  # a tie: the first listed
    assert highest_fitness({"0": None, "1": -0.2}) == "1"
    assert highest_fitness({"0": None}) is None and highest_fitness({}) is None


def test_a_single_search_on_long_prompts_is_advised_to_pick_and_one_on_short_prompts_is_not():
    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.seeds import pick_advice

    assert pick_advice(load_recipe("runs/quickstart.yaml")) is None  # 2048 tokens
    advice = pick_advice(load_recipe("runs/ruler4k.yaml"))
    assert advice.startswith("note: on prompts of 4096 tokens") and "--seeds 0 1 2" in advice
    assert pick_advice(load_recipe("runs/quickstart.yaml", ["task.context_tokens=4096"])) is not None


def test_seeds_refuse_a_folder_holding_another_recipes_run(tmp_path, tiny_model_dir):
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.pipeline.seeds import search_seeds, seeded_recipe

    recipe = load(tmp_path, base_recipe(tiny_model_dir))
    other = load(tmp_path, base_recipe(tiny_model_dir, seed=4))
    create_run_folder(seeded_recipe(other, 0, "tiny"), tmp_path / "runs")
    with pytest.raises(UserError, match="another recipe"):
        search_seeds(recipe, [0], tmp_path / "runs", progress=False, echo=lambda line: None)


def test_compare_pick_without_seeds_is_one_line_and_writes_nothing(tmp_path):
    from evolalloc.cli import search_cmds
    from evolalloc.pipeline import seeds
    from tests.clitools import run_cli

    assert search_cmds.COMPARE_CHOICES == seeds.COMPARE_CHOICES
    result = run_cli("search", "runs/quickstart.yaml", "--compare", "pick", "--runs-dir", str(tmp_path / "runs"))
    assert result.code == 2 and len(result.error_lines) == 1 and "give --seeds too" in result.error_lines[0]
    assert not (tmp_path / "runs").exists()


def test_the_cli_reads_seeds_written_with_spaces_or_commas():
    from evolalloc.cli.search_cmds import _seeds

    assert _seeds("0", (1, 2)) == [0, 1, 2] and _seeds("0,1,2", ()) == [0, 1, 2] and _seeds(None, ()) is None
    with pytest.raises(UserError):
        _seeds("x", ())


def test_show_summarises_a_multi_task_run_from_its_files(tmp_path):
    from evolalloc.config.recipe import recipe_from_dict
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.report.comparison import compare_tasks, save_comparison
    from evolalloc.report.summary import show_run

    recipe = recipe_from_dict({"name": "multi", "budget": {"target": 64}, "tasks": [
        {"name": "passkey", "weight": 2}, {"name": "niah_single", "label": "words"}]}, check_names=False)
    run = create_run_folder(recipe, tmp_path)
    scores = {"passkey": {"evolved": {64: {"a": 1.0, "b": 0.0}}}, "words": {"evolved": {64: {"c": 1.0}}}}
    save_comparison(compare_tasks(scores, {"passkey": 2, "words": 1}, n_resamples=100), run / "comparison.json")
    text = show_run(run)
    assert "task passkey as passkey (weight 2)" in text and "task niah_single as words (weight 1)" in text
    assert "  overall:" in text and "  words:" in text and "    c = 64: evolved 1.000" in text


def test_a_curated_run_started_by_start_run_records_its_curation_in_the_run_folder(tmp_path, tiny_model_dir, judged):
    from evolalloc.pipeline.run import resume_run
    from evolalloc.pipeline.start import start_run

    recipe = load(tmp_path, base_recipe(tiny_model_dir, task=curated(
        search={"n": 2, "curate": {"full_cache_solves": True, "draw": 5}},
        heldout={"n": 2, "curate": {"full_cache_solves": True, "draw": 4}})))
    start_run(recipe, tmp_path / "runs", progress=False)  # curates before the folder exists
    run = tmp_path / "runs" / "tiny"
    stored = json.loads((run / "curation.json").read_text())["tasks"]["passkey"]
    assert (stored["search"]["drawn"], stored["search"]["kept"], stored["heldout"]["drawn"]) == (5, 2, 4)
    report = (run / "report.md").read_text()
    assert "curation passkey/search: drew 5, the full cache solved 3; kept 2 (wanted 2)" in report
    assert "held-out filter: curation passkey/heldout" in report
    judged.update(full=0, compressed=0)
    (run / "comparison.json").unlink()  # a finished search whose comparison was lost
    resume_run(run, progress=False)  # compares again, on the recorded instances
    assert judged["full"] == 0 and (run / "comparison.json").exists()
