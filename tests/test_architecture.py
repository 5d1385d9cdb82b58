"""The package import rules of docs/architecture.md, and no import cycle between modules.

Read from the source with ``ast`` (nothing is imported): every ``import`` counts, deferred ones
inside functions and ones under ``if TYPE_CHECKING:`` too, for the layer rules and for cycles alike:
a deferred import is still a dependency, one that closes a circle only hides it from import time,
and a type checker's import is a dependency of the code's meaning (issue 37: one such edge closed a
circle inside ``core/``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL = ("fitness", "searchspaces", "evolalloc")

# Bottom first. A package may import packages of lower layers only; packages that share a layer
# are independent of each other. ``evolalloc`` itself is only its ``__init__`` (``__version__``,
# ``DEFAULT_MODEL``; it imports nothing), so it and the generic registry form the bottom floor that
# the leaf packages ``fitness`` and ``searchspaces`` may stand on.
LAYERS = [
    ["evolalloc", "evolalloc.registry"],
    ["fitness", "searchspaces"],
    ["evolalloc.core"],
    ["evolalloc.runtime"],
    ["evolalloc.engine"],
    ["evolalloc.search", "evolalloc.export"],
    ["evolalloc.config"],
    ["evolalloc.report"],
    ["evolalloc.learned"],  # below the pipeline: a run can train its own scorer (scorer.train)
    ["evolalloc.pipeline", "evolalloc.bench"],
    ["evolalloc.service"],
    ["evolalloc.client"],  # the public Python client of the service (re-exports)
    ["evolalloc.cli"],
    ["evolalloc.__main__"],
]

# Third-party packages a layer must not import, whatever the layers allow.
FORBIDDEN = {
    "evolalloc.registry": {"numpy", "torch", "transformers", "optuna", "ray"},
    "fitness": {"torch", "optuna", "ray"},
    "searchspaces": {"torch", "transformers", "optuna", "ray"},
    "evolalloc.core": {"torch", "transformers", "optuna", "ray"},
    "evolalloc.runtime": {"optuna", "cma", "ray"},  # the runtime knows nothing of search
    "evolalloc.search": {"torch", "transformers", "ray"},  # the search knows nothing of models
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for top in TOP_LEVEL for p in (ROOT / top).rglob("*.py")}


def package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "evolalloc" and len(parts) > 1 else parts[0]


def imports(path: Path, *, module_level_only: bool) -> list[tuple[str, list[str]]]:
    """``(module, [names])`` of each absolute import (names: those of ``from m import a, b``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []

    def visit(node, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                if top or not module_level_only:
                    found.extend((alias.name, []) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                if top or not module_level_only:
                    found.append((child.module, [alias.name for alias in child.names]))
            else:  # an ``if TYPE_CHECKING:`` block is walked like any other: its imports count
                nested = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                visit(child, top and not nested)

    visit(tree, True)
    return found


def layer_of(package: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if package in layer), None)


def test_every_package_has_a_layer():
    missing = sorted({package_of(m) for m in modules()} - {p for layer in LAYERS for p in layer})
    assert not missing, ("add these packages to a layer in tests/test_architecture.py "
                         f"and docs/architecture.md: {missing}")


def test_packages_import_only_lower_layers_and_no_forbidden_library():
    problems = []
    for module, path in modules().items():
        mine = package_of(module)
        for target, _ in imports(path, module_level_only=False):
            top = target.split(".")[0]
            if top in FORBIDDEN.get(mine, ()):
                problems.append(f"{module} imports {target} (forbidden in {mine})")
            if top not in TOP_LEVEL:
                continue
            theirs = package_of(target)
            if theirs != mine and (layer_of(theirs) is None or layer_of(theirs) >= layer_of(mine)):
                problems.append(f"{module} imports {target}: {mine} may not depend on {theirs}")
    assert not problems, "\n".join(problems)


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules it imports (at module level or inside a function)."""
    graph: dict[str, set[str]] = {m: set() for m in known}
    for module, path in known.items():
        for target, names in imports(path, module_level_only=False):
            if target.split(".")[0] not in TOP_LEVEL:
                continue
            # ``from pkg import sub`` depends on the submodule when ``sub`` is one.
            subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in known]
            graph[module].update(subs or ([target] if target in known else []))
    return graph


def cycles_in(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return found


def test_no_import_cycle_between_modules_not_even_through_a_deferred_import():
    cycles = cycles_in(import_graph(modules()))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_rules_see_a_violation(tmp_path):
    # The checker itself: an upward import and a cycle are caught.
    bad = tmp_path / "bad.py"
    bad.write_text("import evolalloc.cli\n\ndef later():\n    from evolalloc.pipeline import run\n")
    found = [t for t, _ in imports(bad, module_level_only=False)]
    assert found == ["evolalloc.cli", "evolalloc.pipeline"]
    assert [t for t, _ in imports(bad, module_level_only=True)] == ["evolalloc.cli"]
    assert layer_of("evolalloc.cli") > layer_of("evolalloc.core")
    # A circle closed by an import inside a function is still a circle.
    (tmp_path / "a.py").write_text("import evolalloc.b\n")
    (tmp_path / "b.py").write_text("def later():\n    import evolalloc.a\n")
    known = {"evolalloc.a": tmp_path / "a.py", "evolalloc.b": tmp_path / "b.py"}
    assert cycles_in(import_graph(known)) == [["evolalloc.a", "evolalloc.b", "evolalloc.a"]]
    # So is one closed by an import only a type checker reads.
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import evolalloc.a\n")
    assert cycles_in(import_graph(known)) == [["evolalloc.a", "evolalloc.b", "evolalloc.a"]]


# An engine receives a Workload (engine/workload.py). Reaching the recipe or the experiment through
# an attribute would be a hidden dependency on higher layers that no import line shows.
HIDDEN_UPWARD_NAMES = {"recipe", "experiment"}


def hidden_upward_uses(path: Path) -> list[str]:
    """``line: name`` of each identifier, attribute or parameter called ``recipe`` / ``experiment``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        name = (node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name)
                else node.arg if isinstance(node, ast.arg) else None)
        if name in HIDDEN_UPWARD_NAMES:
            found.append(f"{node.lineno}: {name}")
    return found


def test_engines_never_see_a_recipe_or_an_experiment():
    problems = [f"{module}:{use}" for module, path in modules().items() if package_of(module) == "evolalloc.engine"
                for use in hidden_upward_uses(path)]
    assert not problems, "engines take a Workload, not the recipe or the experiment:\n" + "\n".join(problems)


def test_the_engine_rule_sees_a_violation(tmp_path):
    bad = tmp_path / "engine.py"
    bad.write_text("class E:\n    def __init__(self, experiment):\n        self.n = experiment.recipe.engine.workers\n")
    assert sorted(hidden_upward_uses(bad)) == ["2: experiment", "3: experiment", "3: recipe"]
