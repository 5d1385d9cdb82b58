"""``evolalloc bench headroom``: uniform-with-a-scorer vs the full cache on the search split only,
on a tiny random model (real tokenizer, real prefill and decoding)."""

from __future__ import annotations

import pytest

from evolalloc.config.recipe import load_recipe
from evolalloc.pipeline import task_splits as task_splits_module
from evolalloc.pipeline.headroom import measure_headroom
from tests.pipeline.test_pipeline import evolalloc, tiny_recipe


@pytest.fixture
def spied(monkeypatch):
    """Which splits get instances, and how many prefill passes run."""
    seen = {"splits": [], "prefills": 0}
    instances, prefill = task_splits_module.TaskSplits.instances, task_splits_module.prefill_instances

    def spy_instances(self, split):
        seen["splits"].append(split)
        return instances(self, split)

    def spy_prefill(*args, **kwargs):
        seen["prefills"] += 1
        return prefill(*args, **kwargs)

    monkeypatch.setattr(task_splits_module.TaskSplits, "instances", spy_instances)
    monkeypatch.setattr(task_splits_module, "prefill_instances", spy_prefill)
    return seen


def test_headroom_reads_only_the_search_split_and_prefills_it_once(tmp_path, tiny_model_dir, spied):
    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir))
    result = measure_headroom(recipe, ["snapkv", "window", "knorm"], [4, 16, 1024])
    assert set(spied["splits"]) == {"search"}
    assert spied["prefills"] == 1  # every scorer's ranking made in one pass
    assert result.n == 2 and list(result.scores) == ["snapkv", "window", "knorm"]
    # c = 1024 is beyond the ~200-token prompt: uniform keeps everything, so it is the full cache
    for name, row in result.scores.items():
        assert row[1024] == pytest.approx(result.full), name


def test_a_budget_below_what_a_scorer_always_keeps_is_left_blank_not_failed(tmp_path, tiny_model_dir):
    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir))  # its snapkv keeps an 8-token window
    result = measure_headroom(recipe, ["snapkv", "knorm"], [4, 16])
    assert result.scores["snapkv"][4] is None and result.scores["snapkv"][16] is not None
    assert result.scores["knorm"][4] is not None
    text = "\n".join(result.lines())
    assert "the held-out split is never read" in text and "below the 8 tokens it always keeps" in text


def test_bad_budgets_or_an_unknown_scorer_give_one_line_and_exit_2(tmp_path, tiny_model_dir):
    recipe = tiny_recipe(tmp_path, tiny_model_dir)
    bad = evolalloc("bench", "headroom", str(recipe), "--budgets", "8,lots", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "--budgets" in bad.stderr
    floors = evolalloc("bench", "headroom", str(recipe), "--floors", "0.5,2", cwd=tmp_path)
    assert floors.returncode == 2 and floors.stderr.strip().count("\n") == 0 and "--floors" in floors.stderr
    unknown = evolalloc("bench", "headroom", str(recipe), "--scorers", "snapkvv", "--budgets", "16", cwd=tmp_path)
    assert unknown.returncode == 2 and "snapkv" in unknown.stderr and "Traceback" not in unknown.stderr


def test_headroom_prefills_whole_records_not_the_recipes_b_max(tmp_path, tiny_model_dir, capsys):
    """The full cache and the budgets asked for are beyond the recipe's b_max: records bounded at it
    would have every instance prefilled again in full for each evaluation."""
    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir))
    measure_headroom(recipe, ["snapkv"], [4, 1024])
    assert "prefilling those instances again in full" not in capsys.readouterr().err


def test_gates_bring_the_global_gates_row_and_a_recipe_that_trains_them_trains_first(tmp_path, tiny_model_dir,
                                                                                     monkeypatch):
    """The recipe's gates are trained in the run (scorer.train, search split only); the table then
    has uniform gates and the global top-k over the same gates, both the full cache beyond the prompt."""
    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "cache"))
    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, scorer={"name": "gates", "train": {"steps": 10}},
                                     budget={"target": 24, "expansions": []}))
    result = measure_headroom(recipe, ["snapkv", "gates"], [8, 24, 1024], floors=[0.0, 1.0])
    assert list(result.scores) == ["snapkv", "gates", "gates-global", "gates-floors0", "gates-floors1"]
    # the blend's two ends: no floor beyond the always-kept tokens is the global top-k, a full floor uniform
    assert result.scores["gates-floors0"] == result.scores["gates-global"]
    assert result.scores["gates-floors1"][24] == result.scores["gates"][24]
    assert list((tmp_path / "cache" / "trained" / "gates").glob("*/gates.pt"))
    assert result.scores["gates-global"][8] is None  # below the 4 sinks + 16 window it always keeps
    assert result.scores["gates-global"][24] is not None
    for name in ("gates", "gates-global"):
        assert result.scores[name][1024] == pytest.approx(result.full), name
    assert "gates-global: " in "\n".join(result.lines())
