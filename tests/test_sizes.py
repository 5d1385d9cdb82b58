"""Small files, one idea each: no module of ``evolalloc/`` over 400 lines, no function over 80.

Read from the source with ``ast`` (nothing is imported). A function's length runs from its ``def``
line to its last line (``end_lineno``), decorators not counted; a nested function counts on its own
and inside the function that holds it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "evolalloc"
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 80


def file_lines(source: str) -> int:
    return len(source.splitlines())


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int, int]]:
    """``(name, def line, length)`` of every function in ``source`` longer than ``limit`` lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found.append((node.name, node.lineno, length))
    return sorted(found, key=lambda f: f[1])


def test_a_function_of_80_lines_passes_and_one_of_81_is_named_with_its_line_and_length():
    def source(statements: int) -> str:
        body = "\n".join(f"    x{i} = {i}" for i in range(statements))
        return f"import functools\n\n\n@functools.cache\ndef f():\n{body}\n"

    assert long_functions(source(79)) == []  # the def line and 79 more; the decorator does not count
    assert long_functions(source(80)) == [("f", 5, 81)]


def test_no_module_in_the_package_is_over_400_lines():
    offenders = [f"{path.relative_to(PACKAGE.parent)}: {n} lines" for path in sorted(PACKAGE.rglob("*.py"))
                 if (n := file_lines(path.read_text(encoding="utf-8"))) > MAX_FILE_LINES]
    assert not offenders, f"over {MAX_FILE_LINES} lines (split by idea):\n" + "\n".join(offenders)


def test_no_function_in_the_package_is_over_80_lines():
    offenders = [f"{path.relative_to(PACKAGE.parent)}:{line} {name}: {length} lines"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 for name, line, length in long_functions(path.read_text(encoding="utf-8"))]
    assert not offenders, f"over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(offenders)
