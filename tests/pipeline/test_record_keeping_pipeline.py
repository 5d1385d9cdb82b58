"""A run's records: b_max derived once from its budgets; bounded and spilled records give the very
same run as full records in memory; a bad record setting is one line naming the field."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evolalloc.core.errors import UserError
from evolalloc.core.record_settings import parse_size
from evolalloc.pipeline.record_bound import record_bound
from tests.pipeline.test_pipeline import tiny_recipe


def test_b_max_is_the_largest_unit_any_budget_of_the_run_can_reach():
    assert record_bound([128, 256, 512], 4.0, []) == 2048
    assert record_bound([24, 48], 1.5, []) == 72
    pyramid_like = np.array([[100, 100], [20, 20]])
    assert record_bound([24, 48], 1.5, [None, pyramid_like]) == 100  # a baseline's bottom layer can exceed hi * c


@pytest.mark.parametrize("text, size",
                         [("4GiB", 4 * 2**30), ("512MB", 512 * 10**6), ("0B", 0), ("1.5 KiB", 1536), ("7", 7)])
def test_sizes_parse(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["4Gx", "-1GiB", "lots", ""])
def test_a_bad_record_memory_is_one_line_naming_the_field(tmp_path, tiny_model_dir, text):
    from evolalloc.config.recipe import load_recipe

    with pytest.raises(UserError, match="engine.record_memory"):
        load_recipe(tiny_recipe(tmp_path, tiny_model_dir), overrides=[f"engine.record_memory={text}"])


def run_scores(tmp_path, model_dir, name, baselines=None, **engine):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.pipeline.run import search_run

    recipe_path = tiny_recipe(tmp_path, model_dir, name=name, search_space={"name": "layer_groups", "group_size": 2,
                                                                            "ratio_bounds": [0.4, 1.5]},
                              engine={"kind": "local", "threads": 1, "batch_size": 8, **engine},
                              # uniform start: a PyramidKV start could be the shipped profile, whose bottom
                              # layer would set the held-out bound (see the test below)
                              optimizer={"name": "cma", "generations_per_group": 2, "start": "uniform"},
                              **({"baselines": baselines} if baselines else {}))
    recipe = load_recipe(recipe_path)
    run = create_run_folder(recipe, tmp_path / "runs")
    search_run(run, recipe, progress=False)
    comparison = json.loads((run / "comparison.json").read_text())
    profiles = {p.name: json.loads(p.read_text())["budgets"] for p in run.glob("allocation-c*.json")}
    return run, (comparison["rows"], comparison["instances"]), profiles


def test_bounded_spilled_records_give_the_same_run_as_full_ones(tmp_path, tiny_model_dir, monkeypatch):
    import evolalloc.pipeline.record_bound as record_bound_module

    # b_max here: 1.5 x 48 = 72 and PyramidKV's largest unit at 48, of ~200-token prompts.
    bounded_run, bounded, bounded_profiles = run_scores(tmp_path, tiny_model_dir, "bounded", record_memory="0B",
                                                        keep_records=True)  # left to be read below
    from safetensors import safe_open

    spilled = list((bounded_run / "records").glob("*.safetensors"))
    assert spilled  # everything spilled
    with safe_open(str(spilled[0]), "pt") as handle:
        meta = handle.metadata()
    assert int(meta["bound"]) < int(meta["length"])  # and really bounded
    monkeypatch.setattr(record_bound_module, "run_record_bound", lambda *pieces: 10**9)  # nothing dropped
    _, full, full_profiles = run_scores(tmp_path, tiny_model_dir, "full", record_memory="64GiB")
    assert bounded == full
    assert bounded_profiles == full_profiles


def test_records_spill_into_the_run_folder_once_it_exists(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.experiment import Experiment

    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir))
    with Experiment(recipe, progress=False) as experiment:  # as `search` makes it, before the run folder
        assert experiment.record_policy.spill_dir is None
        assert experiment.record_policy.bound is not None
        experiment.record_curations(tmp_path / "run" / "curation.json")
        assert experiment.record_policy.spill_dir == str(tmp_path / "run" / "records")
        assert experiment.keeper.policy is experiment.record_policy
    with Experiment(recipe, progress=False, bounded=False) as whole:  # `evaluate`: any budget, whole records
        assert whole.record_policy.bound is None


def test_held_out_records_are_bounded_by_what_compare_scores_on_them(tmp_path, tiny_model_dir, monkeypatch):
    """The held-out split keeps only the most any compared allocation gives one unit (below the
    run's b_max), and the run reads the same scores as with records bounded at the run's b_max."""
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.pipeline.task_splits import TaskSplits

    made = {}
    real = TaskSplits.records

    def records(self, split):
        out = real(self, split)
        made[split] = {r.bound for r in out}
        return out

    monkeypatch.setattr(TaskSplits, "records", records)
    # No PyramidKV: its bottom layer would set both bounds. b_max = 1.5 x 48 = 72 here.
    run, tight, profiles = run_scores(tmp_path, tiny_model_dir, "tight", ["uniform", "streaming"],
                                      record_memory="64GiB")
    allocations = [json.loads(p.read_text())["budgets"] for p in run.glob("allocation-c*.json")]
    (held_out_bound,) = made["heldout"]
    (search_bound,) = made["search"]
    assert search_bound == 72 and held_out_bound < search_bound  # tighter than the run's b_max
    assert held_out_bound >= max(int(np.max(a)) for a in allocations)  # every compared unit still fits

    monkeypatch.setattr(Experiment, "bound_split", lambda self, split, allocations: None)  # the run's b_max everywhere
    made.clear()
    _, loose, loose_profiles = run_scores(tmp_path, tiny_model_dir, "loose", ["uniform", "streaming"],
                                          record_memory="64GiB")
    assert made["heldout"] == {search_bound}
    assert tight == loose and profiles == loose_profiles
