"""benchmarks/results_tables.py: every table under results/ is rebuilt from the JSON beside it, and
a table whose markdown and JSON disagree fails the check."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from tests.benchscripts import load_benchmark

ROOT = Path(__file__).resolve().parents[2]


def script():
    return load_benchmark("results_tables")


def copy_of_results(tmp_path: Path) -> Path:
    return Path(shutil.copytree(ROOT / "results", tmp_path / "results"))


def a_marked_table(results: Path) -> tuple[Path, str]:
    """A page under ``results`` and the name of the first table it marks."""
    for page in sorted(results.rglob("*.md")):
        match = re.search(r"^<!-- table: ([\w.#-]+) -->$", page.read_text(), re.M)
        if match:
            return page, match[1]
    raise AssertionError("no marked table under results/")


def small_page(tmp_path: Path, rows: list[list[str]]) -> Path:
    """results/demo/README.md with one marked table (left empty) and its data.json."""
    folder = tmp_path / "results" / "demo"
    folder.mkdir(parents=True)
    table = {"columns": ["c", "evolved"], "rows": rows, "data_kept": False}
    (folder / "data.json").write_text(json.dumps({"tables": {"held-out": table}}))
    (folder / "README.md").write_text("# demo\n\n<!-- table: held-out -->\n<!-- /table -->\n\nafter\n")
    return folder


def test_every_table_in_the_repository_matches_its_json(capsys):
    assert script().main(["--check"]) == 0, capsys.readouterr().out


def test_every_results_table_line_sits_between_markers_so_none_is_typed_by_hand():
    for page in (ROOT / "results").rglob("*.md"):
        inside = False
        for line in page.read_text().split("\n"):
            inside = (inside or line.startswith("<!-- table: ")) and line != "<!-- /table -->"
            assert inside or not line.startswith("|"), f"{page}: {line}"


def test_a_changed_number_in_the_markdown_fails_the_check_and_the_rebuild_restores_it(tmp_path, capsys):
    results = copy_of_results(tmp_path)
    page, name = a_marked_table(results)
    original = page.read_text()
    body = original.split(f"<!-- table: {name} -->", 1)[1]
    changed_row = next(line for line in body.split("\n")[2:] if line.startswith("|") and re.search(r"\d", line))
    page.write_text(original.replace(changed_row,
                                     re.sub(r"\d", lambda d: str((int(d[0]) + 1) % 10), changed_row, count=1), 1))
    assert script().main(["--check", "--results", str(results)]) == 1
    assert f"table '{name}' differs from its JSON" in capsys.readouterr().out
    assert script().main(["--results", str(results)]) == 0
    assert page.read_text() == original


def test_a_changed_number_in_the_json_fails_the_check(tmp_path, capsys):
    results = copy_of_results(tmp_path)
    page, name = a_marked_table(results)
    data_path = page.parent / "data.json"
    data = json.loads(data_path.read_text())
    row = data["tables"][name]["rows"][0]
    cell = next(i for i, c in enumerate(row) if re.search(r"\d", c))
    row[cell] = re.sub(r"\d", lambda d: str((int(d[0]) + 1) % 10), row[cell], count=1)
    data_path.write_text(json.dumps(data))
    assert script().main(["--check", "--results", str(results)]) == 1
    assert name in capsys.readouterr().out


def test_the_rebuild_writes_the_rows_and_says_the_data_was_not_kept(tmp_path):
    folder = small_page(tmp_path, [["40", "0.82"], ["48", "0.89"]])
    assert script().main(["--results", str(folder.parent)]) == 0
    text = (folder / "README.md").read_text()
    assert "| c | evolved |\n|---|---|\n| 40 | 0.82 |\n| 48 | 0.89 |\n" in text
    assert "**Data not kept**" in text and text.endswith("<!-- /table -->\n\nafter\n")
    assert script().main(["--check", "--results", str(folder.parent)]) == 0


def test_a_table_whose_data_was_kept_has_no_data_not_kept_line_but_keeps_its_note(tmp_path):
    folder = small_page(tmp_path, [["40", "0.82"]])
    data = json.loads((folder / "data.json").read_text())
    data["tables"]["held-out"].update(data_kept=True, note="n = 100 held-out prompts.",
                                      per_instance={"evolved": {"40": {"u0": 1.0}}})
    (folder / "data.json").write_text(json.dumps(data))
    assert script().main(["--results", str(folder.parent)]) == 0
    text = (folder / "README.md").read_text()
    assert "Data not kept" not in text and "| 40 | 0.82 |\n\nn = 100 held-out prompts.\n<!-- /table -->" in text


def test_a_table_typed_outside_the_markers_fails_the_check(tmp_path, capsys):
    folder = small_page(tmp_path, [["40", "0.82"]])
    script().main(["--results", str(folder.parent)])
    page = folder / "README.md"
    page.write_text(page.read_text() + "\n| c | uniform |\n|---|---|\n| 40 | 0.69 |\n")
    assert script().main(["--check", "--results", str(folder.parent)]) == 1
    assert "outside" in capsys.readouterr().out


def test_a_marker_naming_a_missing_table_is_a_one_line_error_naming_the_file(tmp_path, capsys):
    folder = small_page(tmp_path, [["40", "0.82"]])
    page = folder / "README.md"
    page.write_text(page.read_text().replace("table: held-out", "table: heldout"))
    assert script().main(["--check", "--results", str(folder.parent)]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "data.json" in error and "no table 'heldout'" in error


def test_a_row_of_the_wrong_width_is_refused(tmp_path, capsys):
    folder = small_page(tmp_path, [["40", "0.82", "p 0.01"]])
    assert script().main(["--results", str(folder.parent)]) == 2
    assert "row 0" in capsys.readouterr().err


def test_the_index_links_every_study_folder_once_with_its_status():
    index = (ROOT / "results" / "INDEX.md").read_text()
    lines = [line for line in index.split("\n") if line.startswith("- **")]
    linked = [re.search(r"\]\(([\w-]+)/README\.md\)", line)[1] for line in lines]
    folders = sorted(p.parent.name for p in (ROOT / "results").glob("*/README.md"))
    assert sorted(linked) == folders
    assert all(re.match(r"- \*\*(met|not met|exploratory|pre-registered, not run)\*\*", line) for line in lines)


def test_every_relative_link_of_a_results_page_reaches_a_file():
    for page in (ROOT / "results").rglob("*.md"):
        for target in re.findall(r"\]\((?!https?:)([^)#\s]+)", page.read_text()):
            assert (page.parent / target).exists(), f"{page}: {target}"
