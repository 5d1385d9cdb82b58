"""The comparison table: right numbers per (method, budget), paired against the evolved profile."""

import pytest

from evolalloc.core.errors import UserError
from evolalloc.report.comparison import compare_scores, load_comparison, save_comparison


def test_there_is_one_row_per_method_and_budget_with_the_reference_first(rows):
    assert [(r.budget, r.method) for r in rows] == [
        (64, "evolved"), (64, "uniform"), (64, "streaming"), (128, "evolved"), (128, "uniform"), (128, "streaming"),
    ]


def test_rows_hold_the_mean_and_an_interval_around_it(rows):
    evolved, streaming = rows[0], rows[2]
    assert evolved.score.mean == pytest.approx(0.9) and evolved.score.n == 20
    assert evolved.score.low < 0.9 < evolved.score.high
    assert streaming.score.mean == pytest.approx(0.15)


def test_the_reference_has_no_test_and_each_baseline_is_tested_against_it(rows):
    evolved, uniform, streaming = rows[:3]
    assert evolved.versus is None
    assert uniform.versus.diff == 0 and not uniform.versus.significant()
    assert streaming.versus.diff == pytest.approx(0.75) and streaming.versus.significant()


def test_scores_are_paired_by_instance_not_by_position(scores):
    shuffled = dict(reversed(list(scores["uniform"][64].items())))
    rows = compare_scores({"evolved": {64: scores["evolved"][64]}, "uniform": {64: shuffled}}, n_resamples=500)
    assert rows[1].versus.diff == 0


def test_different_instances_cannot_be_paired():
    with pytest.raises(ValueError, match="different instances"):
        compare_scores({"evolved": {64: {"a": 1.0}}, "uniform": {64: {"b": 1.0}}})


def test_the_table_survives_a_round_trip_through_json(rows, tmp_path):
    path = save_comparison(rows, tmp_path / "comparison.json", meta={"split": "heldout", "n": 20})
    loaded, meta = load_comparison(path)
    assert loaded == rows and meta == {"split": "heldout", "n": 20}


def test_a_broken_comparison_file_names_the_file(tmp_path):
    path = tmp_path / "comparison.json"
    path.write_text("{not json")
    with pytest.raises(UserError) as info:
        load_comparison(path)
    assert info.value.source == str(path)
