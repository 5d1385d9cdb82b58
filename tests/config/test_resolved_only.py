"""Issue 37: the resolved run is the only thing downstream of ``config/`` reads about what a recipe decided.

Static half: the report package never names a recipe (no ``recipe`` variable, parameter or
attribute), and no module outside ``config/`` calls ``resolve_run`` except
the experiment, where a run resolves its recipe once (``Experiment.resolved``) — no fallback
re-resolution anywhere else. Dynamic half: ``report.md``'s "What was searched" is the same whether
it is rendered from the ``ResolvedRun`` in memory or from the ``run.json`` a run folder saved, so
everything the report says is in the resolved run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import evolalloc
from evolalloc.config.recipe import recipe_from_dict
from evolalloc.config.resolved import resolve_run
from evolalloc.config.run_folder import create_run_folder, load_resolved

PACKAGE = Path(evolalloc.__file__).parent
#: Where a run resolves its recipe (once, ``Experiment.resolved``); everywhere else takes the result.
RESOLVES = {"config", "pipeline/experiment.py"}


def _tree(path: Path):
    return ast.parse(path.read_text(), str(path))


def recipe_mentions(tree) -> list[int]:
    """Lines naming a recipe: ``recipe`` as a name, parameter or attribute."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "recipe" or isinstance(node, ast.arg) and node.arg == "recipe":
            lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "recipe":
            lines.append(node.lineno)
    return lines


def resolve_calls(tree) -> list[int]:
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) == "resolve_run"]


def test_the_report_package_never_reads_a_recipe():
    found = {str(path.relative_to(PACKAGE)): recipe_mentions(_tree(path))
             for path in sorted((PACKAGE / "report").rglob("*.py"))}
    assert not {name: lines for name, lines in found.items() if lines}


def test_only_the_experiment_resolves_a_recipe_outside_config():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in RESOLVES or str(relative) in RESOLVES:
            continue
        lines = resolve_calls(_tree(path))
        if lines:
            found[str(relative)] = lines
    assert not found


def test_the_checks_see_a_violation():
    assert recipe_mentions(ast.parse("def f(recipe):\n    return 1\n")) == [1]
    assert recipe_mentions(ast.parse("x = run.recipe\n")) == [1]
    assert resolve_calls(ast.parse("from evolalloc.config.resolved import resolve_run\nr = resolve_run(x)\n")) == [2]


def test_the_report_renders_the_same_from_the_run_json_a_folder_saved(tmp_path):
    from evolalloc.report.markdown import render_report

    recipe = recipe_from_dict({
        "name": "demo", "budget": {"target": 64, "curve": {"points": 5}},
        "tasks": [{"name": "passkey", "weight": 2, "context_tokens": 1000,
                   "search": {"n": 4, "curate": {"full_cache_solves": True, "draw": 9}}},
                  {"name": "niah_single", "label": "words", "params": {"needle_type": "word"}, "context_tokens": 500}],
        "search_space": {"name": "layer_groups", "ratio_bounds": [0.5, 2.0]},
        "optimizer": {"popsize": 6, "lam": 0.25}, "engine": {"workers": 2},
    }, check_names=False)
    folder = create_run_folder(recipe, tmp_path)
    in_memory, saved = render_report(resolve_run(recipe)), render_report(load_resolved(folder))
    assert in_memory == saved
    searched = in_memory.split("## What was searched")[1].split("\n## ")[0]
    for words in ("passkey (weight 2)", "curated: full cache solves, from up to 9 drawn", "| words: task | niah_single",
                  "ratio bounds [0.5, 2.0]", "population 6", "f(S) * (1 + 0.25 * CacheScore)", "2 worker(s)",
                  "5 budgets from 0.25c to 4c, anchors the ends and c searched"):
        assert words in searched, words
