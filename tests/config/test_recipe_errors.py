"""Malformed recipes: each gives one UserError naming the file and the field, and writes nothing."""

import pytest

from evolalloc.config.recipe import load_recipe, recipe_from_dict
from evolalloc.core.errors import UserError

GOOD = """\
name: demo
task:
  name: passkey
  context_tokens: 1000
budget:
  target: 128
"""

# (recipe text, the field the message must name, a phrase the message must contain)
MALFORMED = [
    ("task: [unclosed\n", "line 2, column 1", "not valid YAML"),
    ("task: {name: passkey}\ntask: {name: passkey}\nbudget: {target: 8}\n", "line 2, column 1", "given twice"),
    ("- just\n- a list\n", "(top level)", "must be a mapping"),
    (GOOD + "optimiser: {name: cma}\n", "optimiser", "did you mean 'optimizer'"),
    (GOOD + "optimizer: {sigma: 0.3}\n", "optimizer.sigma", "did you mean 'sigma0'"),
    ("task: {name: passkey}\n", "budget.target", "missing required field"),
    ("budget: {target: 64}\n", "task.name", "missing required field"),
    (GOOD.replace("target: 128", "target: lots"), "budget.target", "must be an integer, got a string"),
    (GOOD.replace("target: 128", "target: 12.5"), "budget.target", "must be an integer, got a number"),
    (GOOD.replace("target: 128", "target: 0"), "budget.target", "must be >= 1"),
    (GOOD.replace("target: 128", "target: 2000"), "budget.target", "nothing to compress"),
    (GOOD + "optimizer: {sigma0: 0}\n", "optimizer.sigma0", "must be > 0"),
    (GOOD + "optimizer: {sigma0: .nan}\n", "optimizer.sigma0", "finite"),
    (GOOD + "optimizer: {gamma: 1.5}\n", "optimizer.gamma", "must be <= 1"),
    (GOOD + "optimizer: {popsize: 2}\n", "optimizer.popsize", "must be >= 3"),
    (GOOD + "optimizer: {name: cmaes}\n", "optimizer.name", "did you mean 'cma'"),
    (GOOD + "optimizer: {generations_per_group: true}\n", "optimizer.generations_per_group", "got a boolean"),
    (GOOD + "model: {dtype: float16}\n", "model.dtype", "choose one of float32, bfloat16"),
    (GOOD + "model: bundled\n", "model", "must be a mapping (section)"),
    (GOOD + "engine: {kind: local, workers: 2}\n", "engine.workers", "kind: ray"),
    (GOOD + "engine: {kind: slurm}\n", "engine.kind", "unknown engine 'slurm'; valid names: local, ray"),
    (GOOD + "baselines: [uniform, pyramidkv]\n", "baselines[1]", "did you mean 'pyramid'"),
    (GOOD + "baselines: [uniform, uniform]\n", "baselines[1]", "listed twice"),
    (GOOD + "baselines: uniform\n", "baselines", "must be a list of strings"),
    (GOOD.replace("target: 128", "target: 3"), "budget.target", "baseline 'streaming' needs a target >= 4"),
    (GOOD.replace("context_tokens: 1000", "context_tokens: 1000\n  question_after_compression: true"), "scorer.name",
     "scorer 'snapkv' ranks tokens by what the queries attend to"),
    (GOOD.replace("context_tokens: 1000",
                  "context_tokens: 1000\n  question_after_compression: true") + "scorer: {name: tova}\n",
     "scorer.name", "scorer 'tova' ranks tokens by what the queries attend to"),
    (GOOD.replace("target: 128", "target: 128\n  expansions: [256, 128]"), "budget.expansions[1]", "listed twice"),
    (GOOD.replace("target: 128", "target: 128\n  expansions: [256, x]"), "budget.expansions[1]", "must be an integer"),
    (GOOD.replace("target: 128", "target: 128\n  expansions: [256, 64]"), "budget.expansions[1]",
     "only carried to larger budgets"),
    (GOOD + "search_space: {ratio_bounds: [2, 1]}\n", "search_space.ratio_bounds", "0 <= lo < hi"),
    (GOOD + "search_space: {ratio_bounds: [0.1]}\n", "search_space.ratio_bounds", "exactly 2 entries"),
    (GOOD + "search_space: {name: layer_group}\n", "search_space.name", "did you mean 'layer_groups'"),
    (GOOD + "search_space: {group_size: 0}\n", "search_space.group_size", "must be >= 1"),
    (GOOD + "storage: study.db\n", "storage", "database URL"),
    (GOOD + "seed: -1\n", "seed", "must be >= 0"),
    (GOOD + "seed: null\n", "seed", "got null"),
    (GOOD.replace("name: demo", "name: my run/1"), "name", "folder name"),
    (GOOD.replace("name: passkey", "name: passkee"), "task.name", "did you mean 'passkey'"),
    (GOOD.replace("context_tokens: 1000", "context_tokens: 1000\n  params: {dept: even}"), "task.params.dept",
     "did you mean 'depth'"),
    (GOOD.replace("context_tokens: 1000", "context_tokens: 1000\n  search: {n: 0}"), "task.search.n", "must be >= 1"),
    (GOOD + "scorer: {name: snap}\n", "scorer.name", "did you mean 'snapkv'"),
    (GOOD + "scorer: {name: snapkv, params: {windw: 8}}\n", "scorer.params", "bad parameters"),
    (GOOD.replace("context_tokens: 1000", "context_tokens: 1000\n  question_after_compression: maybe"),
     "task.question_after_compression", "true or false"),
    # fitness, curation, several tasks, the random control
    (GOOD + "fitness: {mode: likelyhood}\n", "fitness.mode", "did you mean 'likelihood'"),
    (GOOD + "fitness: {modes: generate}\n", "fitness.modes", "did you mean 'mode'"),
    (GOOD.replace("name: passkey", "name: continue_prose") + "fitness: {mode: likelihood}\n", "fitness.mode",
     "task 'continue_prose' has no reference to score in the likelihood mode"),
    (GOOD + "optimizer: {name: randm}\n", "optimizer.name", "did you mean 'random'"),
    (GOOD.replace("context_tokens: 1000", "context_tokens: 1000\n  search: {curate: {full_cache_solve: true}}"),
     "task.search.curate.full_cache_solve", "did you mean 'full_cache_solves'"),
    (GOOD.replace("context_tokens: 1000", "context_tokens: 1000\n  search: {curate: {full_cache_solves: yes please}}"),
     "task.search.curate.full_cache_solves", "true or false"),
    (GOOD.replace("context_tokens: 1000", "context_tokens: 1000\n  search: {curate: {full_cache_solves: true, "
                  "reference_unsolved: pyramid}}"), "task.search.curate.reference_unsolved", "choose one of uniform"),
    (GOOD.replace("context_tokens: 1000", "context_tokens: 1000\n  heldout: {curate: {full_cache_solves: true, "
                  "reference_unsolved: uniform}}"), "task.heldout.curate.reference_unsolved", "never filtered"),
    (GOOD.replace("context_tokens: 1000", "context_tokens: 1000\n  search: {curate: {reference_unsolved: uniform}}"),
     "task.search.curate.reference_unsolved", "needs full_cache_solves: true"),
    (GOOD.replace("context_tokens: 1000", "context_tokens: 1000\n  search: {n: 8, curate: {draw: 20}}"),
     "task.search.curate.draw", "only matters when curating"),
    (GOOD.replace("context_tokens: 1000", "context_tokens: 1000\n  search: {n: 8, curate: {full_cache_solves: true, "
                  "draw: 4}}"), "task.search.curate.draw", "must be >= task.search.n (8)"),
    (GOOD.replace("context_tokens: 1000",
                  "context_tokens: 1000\n  search: {curate: {full_cache_solves: true, draw: 0}}"),
     "task.search.curate.draw", "must be >= 1"),
    (GOOD + "tasks: [{name: passkey}]\n", "tasks", "not both"),
    ("tasks: []\nbudget: {target: 64}\n", "tasks", "at least one task"),
    ("tasks: passkey\nbudget: {target: 64}\n", "tasks", "must be a list of mappings"),
    ("tasks: [passkey]\nbudget: {target: 64}\n", "tasks[0]", "must be a mapping"),
    ("tasks: [{name: passkey, weight: 0}]\nbudget: {target: 64}\n", "tasks[0].weight", "must be > 0"),
    ("tasks: [{name: passkey}, {name: passkee}]\nbudget: {target: 64}\n", "tasks[1].name", "did you mean 'passkey'"),
    ("tasks: [{name: passkey}, {name: passkey}]\nbudget: {target: 64}\n", "tasks[1].label", "used twice"),
    ("tasks: [{name: passkey, label: a b}]\nbudget: {target: 64}\n", "tasks[0].label", "letters, digits"),
    ("tasks: [{name: passkey, weght: 2}]\nbudget: {target: 64}\n", "tasks[0].weght", "did you mean 'weight'"),
    ("tasks: [{name: passkey, context_tokens: 100}]\nbudget: {target: 128}\n", "budget.target",
     "(tasks[0].context_tokens)"),
    ("tasks: [{name: passkey, heldout: {curate: {full_cache_solves: true, reference_unsolved: uniform}}}]\n"
     "budget: {target: 64}\n", "tasks[0].heldout.curate.reference_unsolved", "never filtered"),
    ("tasks: [{name: passkey}, {name: passkey, label: p2}]\nbudget: {target: 64}\nengine: {kind: ray}\n",
     "engine.kind", "one task"),
]


def test_there_are_at_least_fifteen_malformed_recipes():
    assert len(MALFORMED) >= 15


@pytest.mark.parametrize(("text", "field", "phrase"), MALFORMED, ids=[m[1] for m in MALFORMED])
def test_a_malformed_recipe_gives_one_message_naming_file_and_field(tmp_path, text, field, phrase):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as info:
        load_recipe(path)
    err = info.value
    assert err.source == str(path)
    assert err.field == field
    assert phrase in str(err)
    assert str(err).startswith(f"{path}: {field}: ")
    assert "\n" not in str(err) and "Traceback" not in str(err)
    assert err.__cause__ is None and err.__suppress_context__  # nothing to chain a traceback to
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]  # nothing written


def test_a_missing_recipe_file_names_the_file(tmp_path):
    with pytest.raises(UserError, match="no such recipe file") as info:
        load_recipe(tmp_path / "nope.yaml")
    assert info.value.source == str(tmp_path / "nope.yaml")


def test_an_empty_recipe_asks_for_the_first_required_field(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    with pytest.raises(UserError) as info:
        load_recipe(path)
    assert info.value.field == "task.name"


@pytest.mark.parametrize(
    ("override", "field", "phrase"),
    [
        ("optimizer", None, "expected KEY=VALUE"),
        ("optimizer.sigma0=[1", "line 1, column 3", "not valid YAML"),
        ("optimizer.nme=cma", "optimizer.nme", "did you mean 'name'"),
        ("budget.target.value=3", "budget.target", "not a section"),
        ("fitness.mode=likelyhood", "fitness.mode", "did you mean 'likelihood'"),
        ("task.search.curate.draw=2", "task.search.curate.draw", "only matters when curating"),
    ],
)
def test_a_malformed_override_names_the_override(tmp_path, override, field, phrase):
    path = tmp_path / "ok.yaml"
    path.write_text(GOOD)
    with pytest.raises(UserError) as info:
        load_recipe(path, [override], check_names=False)
    assert info.value.source.startswith("--set")
    assert info.value.field == field and phrase in str(info.value)


@pytest.mark.parametrize(("text", "field", "phrase"), MALFORMED, ids=[m[1] for m in MALFORMED])
def test_search_refuses_a_malformed_recipe_in_one_line_and_leaves_the_runs_dir_as_it_was(tmp_path, text, field, phrase):
    from tests.clitools import assert_refused, populated_runs_dir, run_cli, snapshot

    path = tmp_path / "bad.yaml"
    path.write_text(text)
    runs = populated_runs_dir(tmp_path)
    before = snapshot(runs)
    result = run_cli("search", path, "--runs-dir", runs, "--no-progress")
    assert_refused(result, source=str(path), field=field, phrase=phrase)
    assert snapshot(runs) == before


def test_search_refusing_a_recipe_does_not_create_a_missing_runs_dir(tmp_path):
    from tests.clitools import assert_refused, run_cli

    path = tmp_path / "bad.yaml"
    path.write_text(GOOD.replace("target: 128", "target: 0"))
    result = run_cli("search", path, "--runs-dir", tmp_path / "runs", "--no-progress")
    assert_refused(result, source=str(path), field="budget.target")
    assert not (tmp_path / "runs").exists()


MULTI = """\
name: multi
tasks:
  - {name: passkey, weight: 2, context_tokens: 1000}
  - {name: niah_single, label: words, params: {needle_type: word}, context_tokens: 1000}
budget: {target: 128}
"""


@pytest.mark.parametrize(
    ("override", "field", "phrase"),
    [
        ("tasks.1.weight=-1", "tasks[1].weight", "must be > 0"),
        ("tasks.5.weight=1", "tasks.5", "has no item 5"),
        ("tasks.x.weight=1", "tasks.x", "has no item x"),
    ],
)
def test_an_override_of_a_listed_task_names_the_override(tmp_path, override, field, phrase):
    path = tmp_path / "multi.yaml"
    path.write_text(MULTI)
    with pytest.raises(UserError) as info:
        load_recipe(path, [override], check_names=False)
    assert info.value.source == f"--set {override}"
    assert info.value.field == field and phrase in str(info.value)


def test_a_baseline_mapping_is_its_alias_and_a_bad_one_names_the_field(tmp_path):
    base = {"name": "m", "task": {"name": "passkey"}, "budget": {"target": 64}}
    recipe = recipe_from_dict({**base, "baselines": ["uniform", {"allocation": "uniform", "adapter": "adakv"},
                                                     {"allocation": "pyramid", "adapter": "cake"}]})
    assert recipe.baselines == ["uniform", "uniform+adakv", "pyramid+cake"]
    with pytest.raises(UserError, match=r"baselines\[2\]\.adapter: unknown adapter 'x'; known: adakv"):
        recipe_from_dict({**base, "baselines": ["uniform", "pyramid", {"allocation": "uniform", "adapter": "x"}]})
    with pytest.raises(UserError, match=r"baselines\[0\]\.allocation: unknown allocation rule 'unifrom'"):
        recipe_from_dict({**base, "baselines": [{"allocation": "unifrom"}]})
