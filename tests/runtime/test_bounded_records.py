"""A record bounded at b_max serves every budget <= b_max exactly as the full record does, and
refuses a larger one naming b_max."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.runtime.adaptive import Adapted, get_adapter
from evolalloc.runtime.bounded import RecordBoundError, bound_record
from evolalloc.runtime.compress import compress_batch
from evolalloc.runtime.decode import DecodeSettings, generate
from evolalloc.runtime.likelihood import reference_logprobs_batch
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import random_prompt

B_MAX = 40


@pytest.fixture(scope="module")
def records(llama, scorers):
    full = [prefill(llama, random_prompt(n, seed=n), scorers) for n in (120, 97)]
    return full, [bound_record(r, B_MAX) for r in full]


def budgets_up_to(b_max: int, seed: int, floor: int = 12) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(max(floor, 1), b_max + 1, size=(3, 2)) for _ in range(3)] + [np.full((3, 2), b_max)]


def assert_same_cache(a, b):
    assert a.used == b.used
    for layer, used in enumerate(a.used):  # the room past `used` is unwritten memory
        assert torch.equal(a.keys[layer][:, :, :used], b.keys[layer][:, :, :used])
        assert torch.equal(a.values[layer][:, :, :used], b.values[layer][:, :, :used])
        assert (a.valid[layer] is None) == (b.valid[layer] is None)
        if a.valid[layer] is not None:
            assert torch.equal(a.valid[layer], b.valid[layer])


def test_a_bounded_record_holds_fewer_tokens_and_says_its_bound(records):
    full, bounded = records
    for f, b in zip(full, bounded):
        assert b.bound == B_MAX and f.bound is None
        assert b.slots < f.slots and b.nbytes() < f.nbytes()
        assert all(r.shape[-1] == B_MAX for r in b.rankings.values())
    assert bound_record(full[0], 500) is full[0]  # a bound beyond the prompt drops nothing


def test_every_scorer_keeps_the_same_tokens_from_a_bounded_record(records, scorers):
    full, bounded = records
    for scorer in scorers:
        for budgets in budgets_up_to(B_MAX, 0, scorer.always_kept):
            rows_full = [(r, budgets) for r in full]
            rows_bounded = [(r, budgets) for r in bounded]
            assert_same_cache(compress_batch(rows_full, scorer, room=3), compress_batch(rows_bounded, scorer, room=3))


def by_name(scorers, name):
    return next(s for s in scorers if s.name == name)


def test_decoding_gives_the_same_tokens_and_logits(llama, records, scorers):
    full, bounded = records
    settings = DecodeSettings(max_new_tokens=6, keep_logits=True)
    for scorer in (by_name(scorers, "snapkv"), by_name(scorers, "streaming")):
        for budgets in budgets_up_to(B_MAX, 1, scorer.always_kept)[:2]:
            ours = generate(llama, [(r, budgets) for r in bounded], scorer, settings)
            theirs = generate(llama, [(r, budgets) for r in full], scorer, settings)
            for a, b in zip(ours, theirs):
                assert a.token_ids == b.token_ids
                for x, y in zip(a.logits, b.logits):
                    assert torch.equal(x, y)


def test_likelihoods_are_the_same(llama, records, scorers):
    full, bounded = records
    scorer = by_name(scorers, "snapkv")
    reference = torch.tensor([5, 9, 11, 4])
    budgets = budgets_up_to(B_MAX, 2, scorer.always_kept)[0]
    ours = reference_logprobs_batch(llama, [(r, budgets, reference) for r in bounded], scorer)
    theirs = reference_logprobs_batch(llama, [(r, budgets, reference) for r in full], scorer)
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b)


@pytest.mark.parametrize("adapter", ["adakv", "cake", "global"])
def test_adaptive_methods_agree_while_no_head_needs_more_than_b_max(records, scorers, adapter):
    full, bounded = records
    scorer = Adapted(by_name(scorers, "snapkv"), get_adapter(adapter))
    budgets = np.full((3, 2), scorer.always_kept + 1)  # small enough that no head is given more than B_MAX
    for f, b in zip(full, bounded):
        assert np.array_equal(scorer.adapt(f, budgets), scorer.adapt(b, budgets))
        assert_same_cache(compress_batch([(f, budgets)], scorer), compress_batch([(b, budgets)], scorer))


def test_an_adaptive_method_gives_no_head_more_than_b_max(records, scorers):
    full, bounded = records
    scorer = Adapted(by_name(scorers, "snapkv"), get_adapter("global"))
    budgets = np.full((3, 2), B_MAX - 2)
    assert scorer.adapt(full[0], budgets).max() > B_MAX  # uncapped, one head would take more
    adapted = scorer.adapt(bounded[0], budgets)
    assert adapted.max() <= B_MAX and adapted.sum() == budgets.sum()


def test_a_budget_above_b_max_is_refused_naming_b_max(records):
    _, bounded = records
    budgets = np.full((3, 2), 36)
    budgets[1, 0] = B_MAX + 1
    with pytest.raises(RecordBoundError, match=f"above b_max = {B_MAX}"):
        compress_batch([(bounded[0], budgets)], get_scorer("snapkv"))


def test_a_bounded_record_frees_the_whole_prompt_without_the_cycle_collector(llama, scorers):
    """The prefill leaves no reference cycle holding the prompt's K/V: once the full record is
    dropped, only the bounded one's tensors live, even with the cycle collector off (on a GPU the
    cycle held 2 whole records' worth of device memory until a collection: results/gpu-check/)."""
    import gc

    length = 173  # a length no other tensor of the test has, to find the prompt's K/V by shape
    gc.collect()
    gc.disable()
    try:
        record = prefill(llama, random_prompt(length, seed=5), scorers)
        bounded = bound_record(record, B_MAX)
        del record
        alive = [tuple(o.shape) for o in gc.get_objects()
                 if isinstance(o, torch.Tensor) and o.dim() >= 3 and length in o.shape]
    finally:
        gc.enable()
    assert bounded.bound == B_MAX and alive == []
