"""The random-search control: inside the bounds, seeded, resumable, and it spends exactly the
evaluations CMA-ES spends through the same group-wise loop."""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.search import resume_search, run_search
from evolalloc.search.optimizers import get_optimizer
from tests.search.fakes import ProfileEvaluator, SimulatedKill, small_config


def make(seed=3, popsize=8, sigma0=0.3, bounds=(0.1, 4.0), dim=4):
    return get_optimizer("random", x0=np.ones(dim), sigma0=sigma0, bounds=bounds, popsize=popsize, seed=seed)


def test_random_search_asks_a_population_inside_the_bounds_even_with_a_huge_step():
    opt = make(sigma0=5.0, bounds=(0.5, 1.5), popsize=200)
    xs = np.array(opt.ask())
    assert xs.shape == (200, 4)
    assert xs.min() >= 0.5 and xs.max() <= 1.5
    assert len(np.unique(xs.round(6))) > 100  # truncated, not piled up on the bounds by clipping
    assert np.mean((xs == 0.5) | (xs == 1.5)) < 0.01


def test_random_search_draws_from_the_distribution_cma_es_starts_with():
    xs = np.array(make(popsize=2000).ask())
    assert np.allclose(xs.mean(axis=0), 1.0, atol=0.03)
    assert np.allclose(xs.std(axis=0), 0.3, atol=0.03)


def test_random_search_is_seeded_and_never_learns():
    a, b, c = make(seed=11), make(seed=11), make(seed=12)
    first = a.ask()
    np.testing.assert_array_equal(np.array(first), np.array(b.ask()))
    assert not np.array_equal(np.array(first), np.array(c.ask()))
    a.tell(first, [0.0] + [None] * (len(first) - 1))  # failures are ignored, like everything else
    b.tell(first, [9.0] * len(first))  # what was told makes no difference to the next draw
    np.testing.assert_array_equal(np.array(a.ask()), np.array(b.ask()))


def test_random_search_refuses_a_nan_loss_and_a_tell_without_ask():
    opt = make()
    xs = opt.ask()
    with pytest.raises(ValueError, match="None"):
        opt.tell(xs, [float("nan")] * len(xs))
    with pytest.raises(ValueError, match="last ask"):
        make().tell(xs, [1.0] * len(xs))


def test_a_replayed_random_search_asks_the_same_next_generation():
    # What resume relies on: a fresh optimizer asked and told the same generations asks the same next one.
    opt, replay = make(), make()
    for _ in range(2):
        xs = opt.ask()
        opt.tell(xs, [1.0] * len(xs))
        again = replay.ask()
        np.testing.assert_array_equal(np.array(xs), np.array(again))
        replay.tell(again, [1.0] * len(again))
    np.testing.assert_array_equal(np.array(opt.ask()), np.array(replay.ask()))


def test_random_search_spends_exactly_the_evaluations_cma_es_spends_in_the_same_loop(tmp_path):
    spent = {}
    for name in ("cma", "random"):
        evaluator = ProfileEvaluator()
        result = run_search(tmp_path / name, evaluator, small_config(tmp_path / name, optimizer=name), progress=False)
        spent[name] = (evaluator.calls, evaluator.batch_sizes, len(result.history), [r.key for r in result.history])
        bounds = small_config(tmp_path / name).build_space().ratio_bounds
        for record in result.history:
            assert all(bounds[0] <= v <= bounds[1] for v in record.ratios)
    assert spent["random"] == spent["cma"]
    assert spent["cma"][2] == 2 * 3 * 8  # 2 groups x 3 generations x population 8


def test_a_killed_random_search_resumes_to_the_same_result(tmp_path):
    straight = run_search(tmp_path / "a", ProfileEvaluator(), small_config(tmp_path / "a", optimizer="random"),
                          progress=False)
    killed = ProfileEvaluator(kill_at_call=4)
    with pytest.raises(SimulatedKill):
        run_search(tmp_path / "b", killed, small_config(tmp_path / "b", optimizer="random"), progress=False)
    resumed = resume_search(tmp_path / "b", ProfileEvaluator(), progress=False)
    np.testing.assert_array_equal(resumed.best_budgets, straight.best_budgets)
    assert [r.ratios for r in resumed.history] == [r.ratios for r in straight.history]
