import math

import pytest

from evolalloc.core.objective import ObjectiveSettings, cache_score, fitness_value


def test_cache_score_is_one_exactly_at_the_target():
    assert cache_score(128, 128) == 1.0


def test_cache_score_under_budget_is_a_gamma_discount():
    # 1 - 0.2 * (1 - 64/128) = 0.9
    assert cache_score(64, 128) == pytest.approx(0.9)
    # no cache at all: 1 - gamma
    assert cache_score(0, 128, gamma=0.5) == pytest.approx(0.5)


def test_cache_score_over_budget_falls_linearly():
    # 1 - (160 - 128) / 128 = 0.75
    assert cache_score(160, 128) == pytest.approx(0.75)
    assert cache_score(192, 128, gamma=0.9) == pytest.approx(0.5)  # gamma plays no part above c


def test_cache_score_is_zero_at_and_beyond_twice_the_target():
    assert cache_score(256, 128) == 0.0
    assert cache_score(1000, 128) == 0.0


def test_fitness_multiplies_the_task_score_by_the_bonus():
    # 0.8 * (1 + 0.3 * 0.9) = 1.016
    assert fitness_value(0.8, 64, 128) == pytest.approx(1.016)
    # 0.5 * (1 + 0.3 * 1) = 0.65
    assert fitness_value(0.5, 128, 128) == pytest.approx(0.65)
    # far over budget: no bonus, the task score alone
    assert fitness_value(0.7, 10_000, 128) == pytest.approx(0.7)
    # lam and gamma are honoured: 1.0 * (1 + 0.5 * (1 - 0.4 * 0.75)) = 1.35
    assert fitness_value(1.0, 32, 128, lam=0.5, gamma=0.4) == pytest.approx(1.35)


def test_a_zero_task_score_stays_zero_whatever_the_budget():
    assert fitness_value(0.0, 128, 128) == 0.0


def test_a_nan_task_score_raises_instead_of_becoming_a_fitness():
    with pytest.raises(ValueError, match="task_score"):
        fitness_value(math.nan, 128, 128)


def test_a_non_positive_target_raises():
    with pytest.raises(ValueError, match="target"):
        cache_score(10, 0)


def test_settings_default_to_the_paper_and_compute_the_same_values():
    settings = ObjectiveSettings()
    assert (settings.lam, settings.gamma) == (0.3, 0.2)
    assert settings.fitness(0.8, 64, 128) == fitness_value(0.8, 64, 128)
    assert settings.cache_score(160, 128) == pytest.approx(0.75)


@pytest.mark.parametrize("lam, gamma", [(-0.1, 0.2), (0.3, 0.0), (0.3, 1.5)])
def test_settings_refuse_values_outside_the_paper_ranges(lam, gamma):
    with pytest.raises(ValueError):
        ObjectiveSettings(lam=lam, gamma=gamma)
