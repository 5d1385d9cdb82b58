"""Recipes: defaults -> YAML -> --set overrides, resolved, round-tripped, and the run folder."""

from pathlib import Path

import pytest

from evolalloc.config.recipe import load_recipe, recipe_from_dict
from evolalloc.config.run_folder import (
    RECIPE_FILE,
    RUN_FILE,
    allocation_filename,
    create_run_folder,
    load_run_recipe,
)
from evolalloc.core.errors import UserError

RUNS = Path(__file__).resolve().parents[2] / "runs"
QUICKSTART = RUNS / "passkey_snapkv.yaml"  # the passkey + SnapKV recipe the generic tests below read
MINIMAL = "task: {name: passkey}\nbudget: {target: 64}\n"


def write(tmp_path, text, name="recipe.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_passkey_snapkv_recipe_is_the_former_main_job():
    recipe = load_recipe(QUICKSTART)
    assert recipe.model.spec == "bundled:smollm2-135m-instruct"
    assert recipe.task.name == "passkey" and 900 <= recipe.task.context_tokens <= 1100
    assert recipe.budgets == [128, 256, 512]
    assert recipe.search_space.name == "layer_groups" and recipe.search_space.group_size == 8
    assert recipe.engine.kind == "local"
    assert recipe.baselines == ["uniform", "pyramid", "streaming"]


def test_the_quickstart_searches_static_per_layer_snapkv_budgets_on_long_real_text():
    """The README's main job: CMA-ES over one budget per layer (static, so a serving stack can load
    it) for SnapKV, on the 7-digit needle hidden in the bundled books at 2048 tokens, compared on
    held-out prompts with uniform SnapKV, PyramidKV and one unsearched method besides."""
    recipe = load_recipe(RUNS / "quickstart.yaml")
    assert recipe.name == "quickstart" and recipe.model.spec == "bundled:smollm2-135m-instruct"
    assert recipe.task.name == "niah_single" and recipe.task.params == {"needle_type": "number", "haystack": "prose"}
    assert recipe.task.context_tokens == 2048
    assert recipe.scorer.name == "snapkv" and recipe.scorer.train is None
    assert recipe.search_space.name == "layer_groups" and recipe.optimizer.name == "cma"
    assert recipe.baselines[:2] == ["uniform", "pyramid"] and len(recipe.baselines) == 3
    assert recipe.task.heldout.n >= 64 and max(recipe.budgets) < recipe.task.context_tokens


def test_the_quickstart_profile_exports_to_kvpress_as_the_press_that_scores_like_it():
    """kvpress's SnapKVPress averages the votes over the prefix only: the quickstart's scorer is
    set to do the same, so its exported profile is marked exact, with no differences listed."""
    import numpy as np

    from evolalloc.core.allocation import Allocation
    from evolalloc.core.geometry import ModelGeometry
    from evolalloc.export.kvpress import export_kvpress

    recipe = load_recipe(RUNS / "quickstart.yaml")
    # SmolLM2-135M
    geometry = ModelGeometry(num_layers=30, num_query_heads=9, num_kv_heads=3, head_dim=64, max_positions=8192)
    budgets = np.full((geometry.num_layers, geometry.num_kv_heads), recipe.budget.target)
    profile = Allocation(model=recipe.model.spec, geometry=geometry, target=recipe.budget.target, budgets=budgets,
                         scorer=recipe.scorer.name, granularity="layer", scorer_params=recipe.scorer.params,
                         provenance={"method": "evolved"})
    document = export_kvpress(profile, context_length=recipe.task.context_tokens)
    assert document["press"]["class"] == "SnapKVPress"
    assert document["press"]["exact"] is True and document["press"]["differences"] == []


def test_a_minimal_recipe_takes_every_default_and_resolves_seeds_and_expansions(tmp_path):
    recipe = load_recipe(write(tmp_path, MINIMAL + "seed: 7\n", "mini.yaml"), check_names=False)
    assert recipe.name == "mini"
    assert recipe.budget.expansions == [128, 256]
    assert recipe.task.search.seed == recipe.task.heldout.seed == recipe.optimizer.seed == 7
    assert recipe.task.heldout.n == 20 and recipe.task.search.n == 8
    assert recipe.optimizer.sigma0 == 0.3 and recipe.optimizer.popsize is None
    assert recipe.scorer.name == "snapkv" and recipe.storage is None


def test_a_partial_section_keeps_the_defaults_of_its_other_fields(tmp_path):
    text = "task: {name: passkey, heldout: {seed: 3}}\nbudget: {target: 64}\n"
    recipe = load_recipe(write(tmp_path, text), check_names=False)
    assert recipe.task.heldout.n == 20 and recipe.task.heldout.seed == 3


def test_overrides_win_over_the_file_and_parse_values_as_yaml(tmp_path):
    recipe = load_recipe(
        QUICKSTART,
        ["optimizer.generations_per_group=1", "budget.expansions=[512]", "task.params.depth=even", "name=try1"],
        check_names=False,
    )
    assert recipe.optimizer.generations_per_group == 1
    assert recipe.budgets == [128, 512]
    assert recipe.task.params == {"depth": "even"}
    assert recipe.name == "try1"


def test_an_error_in_an_override_names_the_override_not_the_file():
    with pytest.raises(UserError) as info:
        load_recipe(QUICKSTART, ["optimizer.sigma0=-1"], check_names=False)
    assert info.value.source == "--set optimizer.sigma0=-1" and info.value.field == "optimizer.sigma0"


def test_the_resolved_yaml_loads_back_to_an_equal_recipe(tmp_path):
    recipe = load_recipe(QUICKSTART, ["optimizer.popsize=6"])
    again = load_recipe(write(tmp_path, recipe.to_yaml()))
    assert again == recipe and again.to_dict() == recipe.to_dict()


def test_the_recipe_sections_build_the_search_config_the_loop_runs():
    from evolalloc.config.resolved import resolve_run
    from evolalloc.search.config import SearchConfig

    recipe = load_recipe(QUICKSTART, ["search_space.ratio_bounds=[0.1, 3]", "optimizer.options={CMA_active: false}"],
                         check_names=False)
    config = SearchConfig.from_sections(target=resolve_run(recipe).target, search_space=recipe.search_space,
                                        optimizer=recipe.optimizer,
                                        num_layers=30, num_kv_heads=3, storage=recipe.storage, study_name=recipe.name)
    assert config.generations == recipe.optimizer.generations_per_group
    opt = recipe.optimizer
    assert (config.optimizer, config.popsize, config.sigma0, config.lam, config.gamma, config.cache_scope,
            config.budget_rule, config.seed) == (opt.name, opt.popsize, opt.sigma0, opt.lam, opt.gamma,
                                                 opt.cache_scope, opt.budget_rule, opt.seed)
    assert config.ratio_bounds == (0.1, 3.0) and config.target == 128.0
    assert config.optimizer_options == {"CMA_active": False}
    assert config.study_name == "passkey_snapkv" and config.storage is None
    assert len(config.build_space().groups()) == 4


def test_the_optimizer_names_a_recipe_accepts_are_the_registered_back_ends():
    from evolalloc.config.schema import OPTIMIZER_REGISTRY, registry
    from evolalloc.search.optimizers import OPTIMIZERS

    assert registry(OPTIMIZER_REGISTRY) is OPTIMIZERS
    for name in OPTIMIZERS.names():
        recipe_from_dict({"task": {"name": "passkey"}, "budget": {"target": 64}, "optimizer": {"name": name}})


def test_allocation_files_are_named_by_method_and_budget():
    assert allocation_filename(128) == "allocation-c128.json"
    assert allocation_filename(256.0, "pyramid") == "pyramid-c256.json"


def test_head_groups_means_head_granularity():
    recipe = recipe_from_dict({"task": {"name": "passkey"}, "budget": {"target": 64},
                               "search_space": {"name": "head_groups"}}, check_names=False)
    assert recipe.granularity == "head"


# -- the run folder ------------------------------------------------------------------------


def test_a_new_run_folder_holds_the_resolved_recipe(tmp_path):
    recipe = load_recipe(QUICKSTART, check_names=False)
    folder = create_run_folder(recipe, runs_dir=tmp_path / "runs")
    assert folder == tmp_path / "runs" / "passkey_snapkv"
    assert sorted(p.name for p in folder.iterdir()) == [RECIPE_FILE, RUN_FILE]
    assert load_run_recipe(folder) == recipe


def test_an_existing_run_folder_is_never_overwritten(tmp_path):
    recipe = load_recipe(QUICKSTART, check_names=False)
    folder = create_run_folder(recipe, runs_dir=tmp_path, name="once")
    (folder / "report.md").write_text("precious")
    before = (folder / RECIPE_FILE).read_text()
    with pytest.raises(UserError, match="already exists") as info:
        create_run_folder(recipe, runs_dir=tmp_path, name="once")
    assert info.value.source == str(folder)
    assert (folder / "report.md").read_text() == "precious" and (folder / RECIPE_FILE).read_text() == before


def test_even_an_empty_existing_folder_is_refused(tmp_path):
    (tmp_path / "passkey_snapkv").mkdir()
    with pytest.raises(UserError, match="already exists"):
        create_run_folder(load_recipe(QUICKSTART, check_names=False), runs_dir=tmp_path)


def test_a_run_name_with_a_path_separator_is_refused(tmp_path):
    with pytest.raises(UserError) as info:
        create_run_folder(load_recipe(QUICKSTART, check_names=False), runs_dir=tmp_path, name="../escape")
    assert info.value.field == "name"
    assert list(tmp_path.iterdir()) == []


def test_loading_a_folder_that_is_not_a_run_says_so(tmp_path):
    with pytest.raises(UserError, match="holds no recipe.yaml"):
        load_run_recipe(tmp_path)


@pytest.mark.parametrize("section, key, value, field", [
    ("optimizer", "popsize", 2, "popsize"),
    ("optimizer", "sigma0", 0.0, "sigma0"),
    ("optimizer", "generations_per_group", 0, "generations"),
    ("optimizer", "passes", 0, "passes"),
])
def test_a_recipe_and_a_direct_search_config_refuse_a_bad_range_in_the_same_words(section, key, value, field):
    from evolalloc.search.config import SearchConfig

    with pytest.raises(UserError) as from_recipe:
        recipe_from_dict({"task": {"name": "passkey"}, "budget": {"target": 64}, section: {key: value}},
                         check_names=False)
    with pytest.raises(UserError) as direct:
        SearchConfig(num_layers=4, num_kv_heads=2, target=64, **{field: value})
    assert from_recipe.value.field == f"{section}.{key}" and direct.value.field == field
    words = {str(err.value).split(f"{err.value.field}: ", 1)[1] for err in (from_recipe, direct)}
    assert words == {f"must be {'> 0.0' if key == 'sigma0' else f'>= {value + 1}'}, got {value!r}"}
