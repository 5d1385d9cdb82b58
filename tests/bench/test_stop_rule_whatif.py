"""benchmarks/stop_rule_whatif.py: which finished searches "wait for a group's first gain" would change."""

from __future__ import annotations

import json

from tests.benchscripts import load_benchmark


def group(index, generations, gain, reason="no gain"):
    return {"group": index, "generations": generations, "reason": reason, "gain": gain}


def test_only_a_group_that_never_gained_above_the_tolerance_before_the_wait_changes_a_search():
    whatif = load_benchmark("stop_rule_whatif")
    first = whatif.first_changed_group
    assert first([group(0, 9, None), group(1, 5, 0.002)], wait=8, tolerance=1e-3) is None  # both gained
    assert first([group(0, 9, None), group(1, 4, 0.0006), group(2, 4, 0.0)], 8, 1e-3)["group"] == 1  # the first one
    assert first([group(0, 8, 0.0)], 8, 1e-3) is None  # already ran the wait
    assert first([group(0, 20, 0.0, reason="cap")], 8, 1e-3) is None  # stopped for another reason
    assert first([group(0, 4, 0.0005)], 8, 1e-3)["group"] == 0
    assert first([group(0, 4, 0.0005)], 8, 1e-4) is None  # above a smaller tolerance: a gain


def test_a_page_lists_each_run_with_its_verdict_and_bad_pages_are_one_line_and_exit_2(tmp_path, capsys):
    whatif = load_benchmark("stop_rule_whatif")
    page = tmp_path / "page"
    (page / "scores").mkdir(parents=True)
    (page / "scores" / "s1.json").write_text(json.dumps({"runs": {
        "s1-best-s0": {"groups": [group(0, 4, 0.0)]},
        "s1-best-s1": {"groups": [group(0, 7, 0.05)]}}}))
    (page / "data.json").write_text(json.dumps({"tables": {"s1-test": {"rows": [
        ["best-s0", "lukv", "+0.02", "0.5", "no", "none", "not met"],
        ["best-s1", "lukv", "+0.20", "<0.001", "yes", "none", "**met**"]]}}}))
    rows = whatif.whatif(page, wait=8, tolerance=1e-3)
    assert [(r["run"], r["changed_group"], r["verdict"], r["failed"]) for r in rows] == [
        ("best-s0", 1, "not met", "(1)"), ("best-s1", None, "met", "")]
    assert whatif.main([str(page)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == ("1 of 2 searches would change; "
                                                        "1 of the 1 that failed their test")
    (page / "scores" / "bad.json").write_text("{")
    for bad in (tmp_path / "nowhere", page):
        assert whatif.main([str(bad)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(bad) in err
