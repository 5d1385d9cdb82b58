"""Issue 24: "a walk of budget.target from the recipe to the report enters each file at most once".

How the walk is defined here. The value enters at the recipe and leaves at the report; the files
on its way are, in order: ``config/schema.py`` (declared), ``config/recipe.py`` (defaults and
checks), ``config/resolved.py`` (typed into the ``ResolvedRun``; saved as ``run.json`` by
``config/run_folder.py``), then the consumers — the search settings, the record bound, shipping,
the comparison, ``report.md`` and ``show`` — which take it from the ``ResolvedRun``. A file is
"entered again" when a step goes back to an earlier file to recover the value: a module outside
``config/`` reading ``budget.target`` (or the expansions, or ``Recipe.budgets``) from the recipe,
a module parsing budgets back out of allocation file names, or ``show`` opening ``recipe.yaml``
or any file twice. The static half checks the source of every module of ``evolalloc``; the
dynamic half watches which files ``show`` opens on a finished-looking run folder.
"""

import ast
import builtins
import io
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import evolalloc
from evolalloc.config.recipe import recipe_from_dict
from evolalloc.config.resolved import resolve_run
from evolalloc.config.run_folder import RECIPE_FILE, RUN_FILE, create_run_folder
from evolalloc.core.allocation import Allocation
from evolalloc.core.geometry import ModelGeometry

PACKAGE = Path(evolalloc.__file__).parent
# The recipe's budget fields; whoever reads one of these off a recipe re-derives what config decided.
BUDGET_FIELDS = {"target", "expansions", "expansion_rule"}


@pytest.fixture
def recipe():
    return recipe_from_dict({"name": "demo", "task": {"name": "passkey", "context_tokens": 1000},
                             "budget": {"target": 64}},
                            check_names=False)


@pytest.fixture
def evolved():
    geometry = ModelGeometry(num_layers=6, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=4096)
    return Allocation(model="m", geometry=geometry, target=64, provenance={"method": "evolved"},
                      budgets=np.repeat(np.array([[120], [90], [60], [40], [40], [34]]), 2, axis=1))


def _modules(outside: str = "config"):
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] != outside:
            yield path, ast.parse(path.read_text(), str(path))


def _name_of(node) -> str:
    """``recipe`` for ``recipe``, ``self.recipe`` or ``experiment.recipe``; '' otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _key(node) -> str | None:
    return node.slice.value if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) else None


def budget_reads(tree) -> list[int]:
    """Lines reading the recipe's budgets: ``x.budget.target``, ``x["budget"]["target"]``,
    ``recipe.budgets`` (and the same for the expansions and their rule)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in BUDGET_FIELDS and _name_of(node.value) == "budget":
            lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "budgets" and _name_of(node.value) == "recipe":
            lines.append(node.lineno)
        elif _key(node) in BUDGET_FIELDS and _key(node.value) == "budget":
            lines.append(node.lineno)
    return lines


def file_name_parsers(tree) -> list[int]:
    """Lines holding a pattern that recovers a budget from a profile's file name."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "allocation-c(" in node.value]


def test_the_walk_finds_what_it_looks_for():
    """The detector itself: each way of going back to the recipe is caught, a resolved read is not."""
    caught = ast.parse('recipe.budget.target\nx["budget"]["expansions"]\nself.recipe.budgets\n'
                       'float(experiment.recipe.budget.expansion_rule)\nre.compile(r"^allocation-c(\\d+)")')
    assert budget_reads(caught) == [1, 2, 3, 4] and file_name_parsers(caught) == [5]
    fine = ast.parse("experiment.resolved.target\nrun.budgets\nallocation.budgets\nresolved.expansions")
    assert budget_reads(fine) == [] and file_name_parsers(fine) == []


def test_only_config_reads_the_recipes_budgets():
    found = {str(path.relative_to(PACKAGE)): lines for path, tree in _modules() if (lines := budget_reads(tree))}
    assert found == {}, f"read the budgets off the recipe instead of the ResolvedRun: {found}"


def test_no_module_recovers_a_budget_from_a_file_name():
    found = {str(path.relative_to(PACKAGE)): lines for path, tree in _modules("") if (lines := file_name_parsers(tree))}
    assert found == {}, f"parses budgets out of file names: {found}"


def test_show_opens_run_json_once_each_profile_once_and_never_the_recipe(recipe, evolved, tmp_path, monkeypatch):
    from evolalloc.core.allocation_file import save_allocation
    from evolalloc.report.summary import show_run

    folder = create_run_folder(recipe, runs_dir=tmp_path)
    save_allocation(evolved, folder / "allocation-c64.json")
    save_allocation(evolved.expand(128), folder / "allocation-c128.json")
    opened = Counter()
    real_open = io.open

    def watching(file, *args, **kwargs):
        if isinstance(file, (str, Path)) and Path(file).parent == folder:
            opened[Path(file).name] += 1
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", watching)  # pathlib opens through io.open
    monkeypatch.setattr(builtins, "open", watching)
    text = show_run(folder)
    assert "budgets 64, 128, 256 (target 64)" in text and "c = 128 (allocation-c128.json)" in text
    assert opened[RECIPE_FILE] == 0 and opened[RUN_FILE] == 1
    assert opened["allocation-c64.json"] == 1 and opened["allocation-c128.json"] == 1
    assert max(opened.values()) == 1


def test_the_report_and_show_agree_with_the_resolved_run(recipe, tmp_path):
    from evolalloc.report.markdown import render_report

    run = resolve_run(recipe)
    text = render_report(run, allocations={64: "allocation-c64.json", 128: "allocation-c128.json"})
    assert f"| target budget c | {run.target} tokens per (layer, KV head) |" in text
    assert "- c = 64 (target)" in text and "- c = 128 (expansion, proportional rule)" in text
