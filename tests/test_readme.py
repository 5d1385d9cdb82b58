"""The README is the product's face (and the PyPI page): short, its test command is what CI runs,
and no link in it or in docs/ points at a file or a heading that is not there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]

_COMMENT = re.compile(r"<!--.*?-->", flags=re.S)
_CODE = re.compile(r"```.*?```|`[^`\n]*`", flags=re.S)
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def links(page: Path) -> list[str]:
    """Every markdown link target of ``page``, outside comments and code."""
    text = _CODE.sub("", _COMMENT.sub("", page.read_text(encoding="utf-8")))
    return _LINK.findall(text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = _CODE.sub("", page.read_text(encoding="utf-8")) if page.suffix == ".md" else ""
    return {slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def test_the_readme_is_read_in_five_minutes():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


def test_the_readmes_test_command_is_the_one_ci_runs_verbatim():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    command = ci[ci.index("# The README's test command, verbatim:") + 1]
    assert command in README.read_text(encoding="utf-8").splitlines()


def test_the_readme_keeps_the_main_jobs_table_block_for_its_numbers():
    text = README.read_text(encoding="utf-8")
    assert text.count("<!-- main-job-table -->") == 1 and text.count("<!-- /main-job-table -->") == 1
    assert text.index("<!-- main-job-table -->") < text.index("<!-- /main-job-table -->")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_reaches_its_file_and_heading(page):
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.is_file() and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    assert not broken, broken
