"""The ask/tell back-ends: contract, failure rule, state round trip, seeding."""

from __future__ import annotations

import re

import numpy as np
import pytest

from evolalloc.core.errors import UserError
from evolalloc.search.optimizers import AskTellOptimizer, get_optimizer
from evolalloc.search.optimizers.pycma import PycmaOptimizer, failed_loss

BACKENDS = ["cma", "optuna-cma", "optuna-tpe"]


def make(name, dim=4, popsize=8, seed=3, sigma0=0.3):
    return get_optimizer(name, x0=np.ones(dim), sigma0=sigma0, bounds=(0.1, 4.0), popsize=popsize, seed=seed)


def sphere(x):
    return float(np.sum((x - 1.7) ** 2))


@pytest.mark.parametrize("name", BACKENDS)
def test_every_backend_asks_a_population_inside_the_bounds(name):
    opt = make(name)
    xs = opt.ask()
    assert len(xs) == 8
    for x in xs:
        assert x.shape == (4,)
        assert np.all(x >= 0.1) and np.all(x <= 4.0)


@pytest.mark.parametrize("name", BACKENDS)
def test_a_fresh_optimizer_told_the_same_generations_asks_the_same_next_generation(name):
    # What resume relies on: the state is a function of the seed and the tells, so it is rebuilt
    # by replaying the stored trials instead of being saved.
    opt, replay = make(name), make(name)
    for _ in range(2):
        xs = opt.ask()
        losses = [sphere(x) for x in xs]
        opt.tell(xs, losses)
        again = replay.ask()
        np.testing.assert_array_equal(np.array(again), np.array(xs))
        replay.tell(again, losses)
    np.testing.assert_array_equal(np.array(opt.ask()), np.array(replay.ask()))


def test_no_optimizer_can_be_saved_as_a_pickle_any_more():
    assert not hasattr(AskTellOptimizer, "state_bytes") and not hasattr(AskTellOptimizer, "from_state")


@pytest.mark.parametrize("name", BACKENDS)
def test_same_seed_gives_the_same_candidates(name):
    assert np.array_equal(np.array(make(name, seed=11).ask()), np.array(make(name, seed=11).ask()))
    assert not np.array_equal(np.array(make(name, seed=11).ask()), np.array(make(name, seed=12).ask()))


@pytest.mark.parametrize("name", BACKENDS)
def test_a_nan_loss_is_refused_because_failures_are_told_as_none(name):
    opt = make(name)
    xs = opt.ask()
    with pytest.raises(ValueError, match="None"):
        opt.tell(xs, [float("nan")] + [1.0] * (len(xs) - 1))


def test_pycma_ignores_the_global_numpy_rng():
    a, b = make("cma"), make("cma")
    first = a.ask()
    np.random.seed(12345)  # someone else using np.random between our calls
    np.testing.assert_array_equal(np.array(first), np.array(b.ask()))


def test_pycma_ranks_failed_candidates_below_every_success(monkeypatch):
    opt = make("cma")
    told = {}
    original = opt.es.tell
    monkeypatch.setattr(opt.es, "tell", lambda xs, values: told.update(values=list(values)) or original(xs, values))
    xs = opt.ask()
    losses = [float(i) for i in range(len(xs))]
    losses[2] = None
    losses[5] = None
    opt.tell(xs, losses)
    finite = [v for v in losses if v is not None]
    expected = max(finite) + max(1.0, max(finite) - min(finite))
    assert told["values"][2] == told["values"][5] == expected
    assert all(told["values"][i] == losses[i] for i in range(len(xs)) if losses[i] is not None)
    assert expected > max(finite)


def test_failed_loss_rule_is_worst_plus_a_margin_and_none_when_all_failed():
    assert failed_loss([0.5, None, -0.2]) == pytest.approx(0.5 + 1.0)
    assert failed_loss([10.0, None, -10.0]) == pytest.approx(10.0 + 20.0)
    assert failed_loss([None, None]) is None


def test_pycma_leaves_the_distribution_unchanged_when_every_candidate_fails():
    opt = make("cma")
    mean, sigma, iteration = opt.es.mean.copy(), opt.es.sigma, opt.es.countiter
    xs = opt.ask()
    opt.tell(xs, [None] * len(xs))
    assert opt.es.countiter == iteration and opt.es.sigma == sigma
    np.testing.assert_array_equal(opt.es.mean, mean)
    xs = opt.ask()  # and the search goes on
    opt.tell(xs, [sphere(x) for x in xs])
    assert opt.es.countiter == iteration + 1


@pytest.mark.parametrize("name", ["optuna-cma", "optuna-tpe"])
def test_optuna_backends_tell_failures_as_fail_trials(name):
    import optuna

    opt = make(name)
    xs = opt.ask()
    opt.tell(xs, [None] + [sphere(x) for x in xs[1:]])
    states = [t.state for t in opt._study.get_trials()]
    assert states[0] == optuna.trial.TrialState.FAIL
    assert states[1:] == [optuna.trial.TrialState.COMPLETE] * (len(xs) - 1)


def test_optuna_cma_starts_with_a_gaussian_of_sigma0_around_x0():
    xs = np.array(make("optuna-cma", popsize=400, sigma0=0.3).ask())
    assert np.allclose(xs.mean(axis=0), 1.0, atol=0.06)
    assert np.allclose(xs.std(axis=0), 0.3, atol=0.05)


def test_optuna_tpe_tries_the_start_point_first():
    np.testing.assert_array_equal(make("optuna-tpe").ask()[0], np.ones(4))


@pytest.mark.parametrize("name", BACKENDS)
def test_every_backend_improves_on_a_sphere(name):
    opt = make(name, seed=1)
    best = []
    for _ in range(12):
        xs = opt.ask()
        losses = [sphere(x) for x in xs]
        opt.tell(xs, losses)
        best.append(min(losses))
    assert min(best[-4:]) < sphere(np.ones(4)) / 4


def test_implementations_name_the_library_that_ran():
    import cma
    import optuna

    assert make("cma").implementation == ("cma", cma.__version__)
    assert make("optuna-cma").implementation[0] == "cmaes"  # not pycma
    assert make("optuna-tpe").implementation == ("optuna", optuna.__version__)
    assert isinstance(make("cma"), PycmaOptimizer)


def test_an_unknown_optimizer_name_lists_the_valid_ones():
    with pytest.raises(UserError, match=r"did you mean 'optuna-cma'.*valid names: cma, optuna-cma, optuna-tpe, random"):
        make("optuna_cma")


def test_optimizer_options_reach_the_back_end_and_a_bad_one_is_refused_by_name():
    cma_opt = get_optimizer("cma", x0=np.ones(3), sigma0=0.3, bounds=(0.1, 4.0), popsize=4, seed=0,
                            options={"CMA_active": False})
    assert cma_opt.es.opts["CMA_active"] is False
    tpe = get_optimizer("optuna-tpe", x0=np.ones(3), sigma0=0.3, bounds=(0.1, 4.0), popsize=4, seed=0,
                        options={"n_startup_trials": 3})
    assert tpe._sampler._n_startup_trials == 3
    with pytest.raises(UserError, match="did you mean 'CMA_active'"):
        get_optimizer("cma", x0=np.ones(3), sigma0=0.3, bounds=(0.1, 4.0), popsize=4, seed=0, options={"CMA_activ": 1})
    with pytest.raises(UserError, match="popsize"):  # set by evolalloc itself, not an option
        get_optimizer("cma", x0=np.ones(3), sigma0=0.3, bounds=(0.1, 4.0), popsize=4, seed=0, options={"popsize": 9})
    with pytest.raises(UserError, match="TPESampler has no option 'n_startup'"):
        get_optimizer("optuna-tpe", x0=np.ones(3), sigma0=0.3, bounds=(0.1, 4.0), popsize=4, seed=0,
                      options={"n_startup": 3})


@pytest.mark.parametrize("name, options, phrase", [
    ("optuna-tpe", {"n_startup_trials": "3"}, "n_startup_trials must be an integer"),
    ("optuna-tpe", {"n_ei_candidates": 10**9}, "n_ei_candidates must be an integer in [0, 100000]"),
    ("optuna-tpe", {"multivariate": "yes"}, "multivariate must be true or false"),
    ("optuna-tpe", {"prior_weight": 2.0}, "has no option 'prior_weight'"),  # deprecated by Optuna
    ("optuna-tpe", {"gamma": "lambda n: n"}, "has no option 'gamma'"),  # a function: not from a recipe
    ("optuna-cma", {"lr_adapt": 1}, "lr_adapt must be true or false"),
    ("optuna-cma", {"popsize": 8}, "has no option 'popsize' (set by evolalloc)"),
    ("optuna-cma", {"restart_strategy": "ipop"}, "has no option 'restart_strategy'"),
])
def test_optuna_options_are_an_allow_list_of_typed_values_like_pycmas(name, options, phrase):
    """Issue 20: any keyword of the sampler used to pass, so a string or a huge count failed (or ran
    for ever) inside Optuna mid-search; now the recipe is refused by name and type."""
    with pytest.raises(UserError, match=re.escape(phrase)):
        get_optimizer(name, x0=np.ones(3), sigma0=0.3, bounds=(0.1, 4.0), popsize=4, seed=0, options=options)


def test_typed_optuna_options_reach_the_sampler():
    tpe = get_optimizer("optuna-tpe", x0=np.ones(3), sigma0=0.3, bounds=(0.1, 4.0), popsize=4, seed=0,
                        options={"multivariate": True, "n_ei_candidates": 7})
    assert tpe._sampler._n_ei_candidates == 7
    cmaes = get_optimizer("optuna-cma", x0=np.ones(3), sigma0=0.3, bounds=(0.1, 4.0), popsize=4, seed=0,
                          options={"use_separable_cma": True})
    assert cmaes._sampler._use_separable_cma is True
