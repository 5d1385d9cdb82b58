"""show RUN: a summary from the run folder's files alone."""

import pytest

from evolalloc.config.run_folder import create_run_folder
from evolalloc.core.allocation_file import save_allocation
from evolalloc.core.errors import UserError
from evolalloc.report.comparison import save_comparison
from evolalloc.report.summary import show_run


def test_a_fresh_run_is_reported_as_not_searched(recipe, tmp_path):
    text = show_run(create_run_folder(recipe, runs_dir=tmp_path))
    assert text.startswith("run demo") and "created, not searched yet" in text
    assert "budgets 64, 128, 256 (target 64)" in text


def test_a_finished_run_lists_its_profiles_and_comparison(recipe, profiles, rows, tmp_path):
    folder = create_run_folder(recipe, runs_dir=tmp_path)
    save_allocation(profiles["evolved"], folder / "allocation-c64.json")
    save_allocation(profiles["evolved"].expand(128), folder / "allocation-c128.json")
    assert "search finished, not compared on the held-out split (evolalloc resume" in show_run(folder)
    save_comparison(rows, folder / "comparison.json")
    (folder / "report.md").write_text("# report\n")
    text = show_run(folder)
    assert "status: search finished\n" in text
    assert "c = 64 (allocation-c64.json): layers 34–120 tokens, mean 64.0, fitness 1.1000" in text
    assert "expanded from c = 64" in text
    assert "streaming 0.150" in text and "evolved 0.900" in text
    assert f"report: {folder / 'report.md'}" in text


def test_showing_a_folder_that_is_not_a_run_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not a run folder"):
        show_run(tmp_path)


def test_show_takes_the_budgets_from_the_resolved_run_and_opens_each_profile_once(recipe, profiles, tmp_path,
                                                                                  monkeypatch):
    import evolalloc.report.summary as summary
    from evolalloc.config.resolved import resolve_run

    folder = create_run_folder(recipe, runs_dir=tmp_path)
    save_allocation(profiles["evolved"], folder / "allocation-c64.json")
    save_allocation(profiles["evolved"].expand(128), folder / "allocation-c128.json")
    # Not a budget of this run: a name alone does not make it one of the run's profiles.
    save_allocation(profiles["evolved"].expand(999), folder / "allocation-c999.json")
    opened = []
    real = summary.load_allocation
    monkeypatch.setattr(summary, "load_allocation", lambda path, **kw: opened.append(path.name) or real(path, **kw))
    # The caller's resolved run is used as it is: neither run.json nor recipe.yaml is read again.
    monkeypatch.setattr(summary, "load_resolved", lambda *a, **k: pytest.fail("the run folder read again"))
    text = show_run(folder, resolve_run(recipe))
    assert sorted(opened) == ["allocation-c128.json", "allocation-c64.json"]
    assert "c = 64 (allocation-c64.json)" in text and "c = 128 (allocation-c128.json)" in text
    assert "999" not in text
