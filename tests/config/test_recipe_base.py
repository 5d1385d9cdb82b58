"""``base:``: a recipe overrides a few keys of another, merged before validation; cycles and
missing bases are refused in one line naming the file."""

import pytest

from evolalloc.config.recipe import load_recipe, recipe_from_dict
from evolalloc.config.recipe_base import deep_merge
from evolalloc.config.run_folder import create_run_folder, load_run_recipe
from evolalloc.core.errors import UserError

BASE = """\
name: parent
task:
  name: passkey
  context_tokens: 1000
  search: {n: 12}
budget:
  target: 128
  expansions: [256, 512]
optimizer: {sigma0: 0.3, generations_per_group: 4}
baselines: [uniform, pyramid, streaming]
"""


def write(folder, name, text):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_child_naming_another_scorer_does_not_inherit_the_bases_scorer_params(tmp_path):
    write(tmp_path, "parent.yaml", BASE + "scorer: {name: snapkv, params: {kernel: 5, pooling: max}}\n")
    gates = load_recipe(write(tmp_path, "gates.yaml", "base: parent.yaml\nscorer: {name: streaming}\n"))
    assert gates.scorer.name == "streaming" and gates.scorer.params == {}
    own = load_recipe(write(tmp_path, "own.yaml", "base: parent.yaml\nscorer: {name: streaming, params: {sinks: 8}}\n"))
    assert own.scorer.params == {"sinks": 8}
    same = load_recipe(write(tmp_path, "same.yaml", "base: parent.yaml\nscorer: {name: snapkv, params: {kernel: 7}}\n"))
    assert same.scorer.params == {"kernel": 7, "pooling": "max"}  # the same scorer: its params still merge
    unnamed = load_recipe(write(tmp_path, "unnamed.yaml", "base: parent.yaml\nscorer: {params: {kernel: 9}}\n"))
    assert unnamed.scorer.name == "snapkv" and unnamed.scorer.params == {"kernel": 9, "pooling": "max"}


def test_a_child_overrides_a_few_keys_and_keeps_the_rest(tmp_path):
    write(tmp_path, "parent.yaml", BASE)
    child = write(tmp_path, "child.yaml", "base: parent.yaml\ntask: {search: {n: 8}}\noptimizer: {sigma0: 0.2}\n")
    recipe = load_recipe(child)
    assert recipe.task.search.n == 8 and recipe.task.name == "passkey" and recipe.task.context_tokens == 1000
    assert recipe.optimizer.sigma0 == 0.2 and recipe.optimizer.generations_per_group == 4
    assert recipe.budgets == [128, 256, 512]


def test_a_list_in_the_child_replaces_the_bases_list(tmp_path):
    write(tmp_path, "parent.yaml", BASE)
    child = write(tmp_path, "child.yaml", "base: parent.yaml\nbaselines: [uniform]\nbudget: {expansions: [192]}\n")
    recipe = load_recipe(child)
    assert recipe.baselines == ["uniform"] and recipe.budgets == [128, 192]


def test_the_run_is_named_by_the_child_not_by_its_base(tmp_path):
    write(tmp_path, "parent.yaml", BASE)
    assert load_recipe(write(tmp_path, "child.yaml", "base: parent.yaml\n")).name == "child"
    assert load_recipe(write(tmp_path, "named.yaml", "base: parent.yaml\nname: mine\n")).name == "mine"


def test_the_base_path_is_relative_to_the_recipes_own_folder(tmp_path, monkeypatch):
    write(tmp_path, "shared/parent.yaml", BASE)
    child = write(tmp_path, "studies/one/child.yaml", "base: ../../shared/parent.yaml\nbudget: {target: 64}\n")
    monkeypatch.chdir(tmp_path / "shared")  # the working folder plays no part
    assert load_recipe(child).budgets == [64, 256, 512]


def test_bases_chain_and_the_nearest_file_wins(tmp_path):
    write(tmp_path, "a.yaml", BASE)
    write(tmp_path, "b.yaml", "base: a.yaml\noptimizer: {sigma0: 0.25}\ntask: {search: {n: 10}}\n")
    child = write(tmp_path, "c.yaml", "base: b.yaml\ntask: {search: {n: 6}}\n")
    recipe = load_recipe(child)
    assert (recipe.task.search.n, recipe.optimizer.sigma0, recipe.optimizer.generations_per_group) == (6, 0.25, 4)


def test_set_overrides_apply_after_the_merge(tmp_path):
    write(tmp_path, "parent.yaml", BASE)
    child = write(tmp_path, "child.yaml", "base: parent.yaml\noptimizer: {sigma0: 0.2}\n")
    assert load_recipe(child, ["optimizer.sigma0=0.1"]).optimizer.sigma0 == 0.1


def test_the_saved_recipe_is_the_merged_one_and_loads_without_the_base(tmp_path):
    parent = write(tmp_path, "parent.yaml", BASE)
    child = write(tmp_path, "child.yaml", "base: parent.yaml\ntask: {search: {n: 8}}\n")
    recipe = load_recipe(child)
    folder = create_run_folder(recipe, tmp_path / "runs")
    import yaml

    saved = yaml.safe_load((folder / "recipe.yaml").read_text())
    assert (
        "base" not in saved and saved["task"]["search"]["n"] == 8 and saved["optimizer"]["generations_per_group"] == 4
    )
    parent.unlink()  # the run folder does not depend on the base file
    again = load_run_recipe(folder)
    assert again.task.search.n == 8 and again.optimizer.generations_per_group == 4 and again.name == "child"


def test_a_cycle_is_refused_naming_the_chain(tmp_path):
    write(tmp_path, "a.yaml", "base: b.yaml\n" + BASE)
    write(tmp_path, "b.yaml", "base: c.yaml\n")
    write(tmp_path, "c.yaml", "base: a.yaml\n")
    with pytest.raises(UserError) as err:
        load_recipe(tmp_path / "a.yaml")
    message = str(err.value)
    assert "\n" not in message and err.value.field == "base" and err.value.source.endswith("c.yaml")
    chain = [part.rsplit("/", 1)[-1] for part in message.split("cycle: ", 1)[1].split(" -> ")]
    assert chain == ["a.yaml", "b.yaml", "c.yaml", "a.yaml"]


def test_a_recipe_naming_itself_is_a_cycle(tmp_path):
    path = write(tmp_path, "self.yaml", "base: self.yaml\n" + BASE)
    with pytest.raises(UserError, match="cycle"):
        load_recipe(path)


def test_a_missing_base_is_refused_naming_the_file_and_the_missing_base(tmp_path):
    child = write(tmp_path, "child.yaml", "base: nowhere.yaml\ntask: {name: passkey}\n")
    with pytest.raises(UserError) as err:
        load_recipe(child)
    assert err.value.source == str(child) and err.value.field == "base" and "nowhere.yaml" in str(err.value)


@pytest.mark.parametrize("value", ["[a.yaml]", "''", "3"])
def test_a_base_that_is_not_a_path_is_refused(tmp_path, value):
    child = write(tmp_path, "child.yaml", f"base: {value}\ntask: {{name: passkey}}\n")
    with pytest.raises(UserError) as err:
        load_recipe(child)
    assert err.value.field == "base" and err.value.source == str(child)


def test_a_base_that_is_not_a_mapping_is_refused_naming_the_base(tmp_path):
    parent = write(tmp_path, "parent.yaml", "- a\n- list\n")
    with pytest.raises(UserError) as err:
        load_recipe(write(tmp_path, "child.yaml", "base: parent.yaml\n"))
    assert err.value.source == str(parent) and "mapping" in str(err.value)


def test_a_bad_value_inherited_from_a_base_is_blamed_on_the_base(tmp_path):
    parent = write(tmp_path, "parent.yaml", BASE.replace("sigma0: 0.3", "sigma0: 0"))
    child = write(tmp_path, "child.yaml", "base: parent.yaml\ntask: {search: {n: 8}}\n")
    with pytest.raises(UserError) as err:
        load_recipe(child)
    assert err.value.source == str(parent) and err.value.field == "optimizer.sigma0"


def test_a_bad_value_the_child_sets_is_blamed_on_the_child(tmp_path):
    write(tmp_path, "parent.yaml", BASE)
    child = write(tmp_path, "child.yaml", "base: parent.yaml\noptimizer: {sigma0: 0}\n")
    with pytest.raises(UserError) as err:
        load_recipe(child)
    assert err.value.source == str(child) and err.value.field == "optimizer.sigma0"


def test_a_parsed_recipe_with_a_base_is_refused_as_it_has_no_folder():
    """The service gets mappings, never files: it must not be made to read a base from disk."""
    with pytest.raises(UserError) as err:
        recipe_from_dict({"base": "/etc/evolalloc.yaml", "task": {"name": "passkey"}, "budget": {"target": 64}})
    assert err.value.field == "base"


def test_deep_merge_merges_mappings_replaces_the_rest_and_modifies_neither():
    base = {"a": {"x": 1, "y": [1, 2]}, "b": 2}
    override = {"a": {"y": [3]}, "c": None}
    merged = deep_merge(base, override)
    assert merged == {"a": {"x": 1, "y": [3]}, "b": 2, "c": None}
    merged["a"]["y"].append(4)
    assert base == {"a": {"x": 1, "y": [1, 2]}, "b": 2} and override == {"a": {"y": [3]}, "c": None}
