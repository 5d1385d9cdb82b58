"""The model benchmarks' ``--budgets`` option: one parser, refused before any model is loaded."""

from __future__ import annotations

import pytest

from tests.clitools import run_cli


@pytest.mark.parametrize("command", ["fitness", "records"])
@pytest.mark.parametrize("budgets, phrase",
                         [("64,x", "whole numbers"), ("0,64", "positive whole numbers"), (",", "at least one")])
def test_bad_budgets_are_one_line_naming_the_option(command, budgets, phrase):
    # The model spec does not exist: reaching the loader would be a different error.
    result = run_cli("bench", command, "--model", "/nonexistent/model", "--budgets", budgets)
    assert result.code == 2, (result.code, result.stderr)
    assert "Traceback" not in result.stderr
    assert len(result.error_lines) == 1 and "--budgets" in result.error_lines[0] and phrase in result.error_lines[0]
