"""The ``evaluate`` and ``compare`` workflows (``pipeline/evaluate.py``), without the CLI around them."""

from __future__ import annotations

import pytest

from evolalloc.core.errors import UserError
from tests.pipeline.test_pipeline import tiny_recipe


@pytest.fixture
def recipe(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe

    return load_recipe(tiny_recipe(tmp_path, tiny_model_dir))


def test_a_bad_allocation_file_is_refused_before_anything_is_prefilled(tmp_path, recipe, monkeypatch):
    from evolalloc.pipeline.evaluate import evaluate_allocations
    from evolalloc.pipeline.task_splits import TaskSplits

    def records(self, split):
        raise AssertionError("a split was prefilled before every file was read")

    monkeypatch.setattr(TaskSplits, "records", records)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(UserError) as err:
        list(evaluate_allocations(recipe, ["uniform", str(bad)], progress=False))
    assert str(bad) in str(err.value)


def test_each_allocation_is_scored_on_the_split_with_its_interval_and_summary(recipe):
    from evolalloc.pipeline.evaluate import evaluate_allocations

    evaluated = list(evaluate_allocations(recipe, ["uniform", "full"], budget=16, progress=False))
    assert [e.name for e in evaluated] == ["uniform", "full"]
    uniform, full = evaluated
    assert uniform.allocation.target == 16 and len(uniform.result.instances) == 3 == uniform.interval.n  # heldout n = 3
    assert uniform.interval.mean == pytest.approx(sum(o.score for o in uniform.result.instances) / 3)
    assert uniform.summary("passkey", "heldout").startswith("uniform (c = 16, scorer snapkv) on passkey/heldout: mean ")
    assert full.summary("passkey", "heldout").startswith("full (the full cache, scorer snapkv)")


def test_compare_on_a_run_without_profiles_says_to_finish_the_search_first(tmp_path, recipe):
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.pipeline.evaluate import WorkflowError, compare_run

    run = create_run_folder(recipe, tmp_path / "runs")
    with pytest.raises(WorkflowError, match="finish the search first"):
        compare_run(run, progress=False)
