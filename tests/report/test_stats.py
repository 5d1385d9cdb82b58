"""Bootstrap intervals and paired tests on hand-made scores."""

import numpy as np
import pytest

from evolalloc.report.stats import align, bootstrap_mean, paired_test


def test_the_interval_contains_the_mean_and_narrows_with_more_instances():
    rng = np.random.default_rng(1)
    small = bootstrap_mean(rng.integers(0, 2, 20), seed=0)
    large = bootstrap_mean(rng.integers(0, 2, 2000), seed=0)
    assert small.low <= small.mean <= small.high and small.n == 20
    assert (large.high - large.low) < (small.high - small.low) / 4


def test_the_interval_covers_a_known_mean_as_a_95_percent_interval_should():
    rng = np.random.default_rng(2)
    hits = sum(
        (iv := bootstrap_mean(rng.normal(0.5, 0.1, 40), seed=i, n_resamples=2000)).low <= 0.5 <= iv.high
        for i in range(200)
    )
    assert 175 <= hits <= 199  # ~95 % of 200


def test_the_same_seed_gives_the_same_interval():
    values = [1, 0, 1, 1, 0, 1, 0, 1]
    assert bootstrap_mean(values, seed=3) == bootstrap_mean(values, seed=3)


def test_a_constant_sample_gets_a_zero_width_interval():
    interval = bootstrap_mean([1.0] * 20)
    assert (interval.mean, interval.low, interval.high) == (1.0, 1.0, 1.0)


def test_identical_methods_are_not_significantly_different_and_nothing_crashes():
    scores = [1, 0, 1, 1, 0, 1, 1, 0, 1, 1]
    result = paired_test(scores, scores)
    assert result.diff == 0 and result.low == result.high == 0
    assert result.p_value == 1.0 and not result.significant()
    assert result.p_wilcoxon is None and result.test == "paired-bootstrap"
    assert "all differences are zero" in result.note


def test_a_clearly_better_method_is_significant_by_both_tests():
    better = [1.0] * 18 + [0.0] * 2
    worse = [0.0] * 16 + [1.0] * 4
    result = paired_test(better, worse)
    assert result.diff == pytest.approx(0.7)
    assert result.low > 0 and result.significant()
    assert result.test == "wilcoxon" and result.p_wilcoxon < 0.01 and result.p_bootstrap < 0.01


def test_noise_around_the_same_mean_is_not_significant():
    rng = np.random.default_rng(5)
    a = rng.normal(0.6, 0.1, 30)
    b = a + rng.normal(0, 0.1, 30) * np.where(np.arange(30) % 2, 1, -1)
    result = paired_test(a, b)
    assert result.low < 0 < result.high and not result.significant()


def test_a_worse_method_gets_a_negative_difference():
    result = paired_test([0, 0, 0, 0, 0, 0, 0, 0, 1, 0], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1])
    assert result.diff == pytest.approx(-0.9) and result.high < 0 and result.significant()


def test_pairing_matters_a_consistent_small_gain_is_significant():
    base = np.linspace(0.1, 0.9, 25)
    result = paired_test(base + 0.02, base)
    assert result.significant()  # unpaired, the spread of base would drown a 0.02 gain


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="same instances"):
        paired_test([1, 0], [1, 0, 1])
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_mean([1.0, float("nan")])
    with pytest.raises(ValueError, match="non-empty"):
        bootstrap_mean([])


def test_align_pairs_scores_by_instance_and_refuses_mismatches():
    assert align({"b": 0.0, "a": 1.0}, {"a": 0.5, "b": 0.25}) == ([1.0, 0.0], [0.5, 0.25])
    with pytest.raises(ValueError, match="different instances"):
        align({"a": 1.0}, {"b": 1.0})
