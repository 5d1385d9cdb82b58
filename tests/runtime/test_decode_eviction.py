"""Decode-time eviction holds a profile's budgets while the model writes, and is exact where it must be:
budgets that hold everything give transformers' tokens, batched rows are independent, the cache never
stores more than ``budget + interval - 1`` tokens per (layer, KV head) between two steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.runtime.decode import DecodeSettings, build_cache, decode_batch, generate
from evolalloc.runtime.decode_eviction import check_decode_scorer
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import LOGITS_CLOSE, random_prompt, tiny_model
from tests.runtime.test_equivalence import reference_generation


def ranking_generated(scorers):
    return [s for s in scorers if s.ranks_generated]


@pytest.mark.parametrize("architecture", ["llama", "qwen2", "mistral-sliding"])
def test_budgets_that_hold_everything_give_the_stock_models_tokens_for_every_scorer_that_can(architecture, scorers):
    model, stock = tiny_model(architecture), tiny_model(architecture, attn="sdpa")
    ids = random_prompt(60, seed=1)
    tokens, logits = reference_generation(stock, ids, steps=24)
    able = ranking_generated(scorers)
    assert {s.name for s in able} >= {"snapkv", "h2o", "tova", "streaming", "learned", "ppo-policy"}
    record = prefill(model, ids, able)
    for scorer in able:
        for interval in (1, 5):
            budgets = np.full((3, 2), 60 + 24)  # prompt + output: nothing is ever evicted
            (gen,) = generate(model, [(record, budgets)], scorer, DecodeSettings(max_new_tokens=24, keep_logits=True),
                              decode=DecodeEviction(interval))
            assert gen.token_ids == tokens, (scorer.name, interval)
            for ours, theirs in zip(gen.logits, logits):
                torch.testing.assert_close(ours, theirs.float().cpu(), **LOGITS_CLOSE)


def test_held_budgets_change_the_answer_and_prompt_only_eviction_is_left_as_it_was(llama):
    scorer = get_scorer("snapkv", window=8)
    record = prefill(llama, random_prompt(80, seed=3), [scorer])
    settings = DecodeSettings(max_new_tokens=40, keep_logits=True)
    (prompt_only,) = generate(llama, [(record, np.full(3, 12))], scorer, settings)
    (held,) = generate(llama, [(record, np.full(3, 12))], scorer, settings, decode=DecodeEviction(4))
    assert held.logits[0].equal(prompt_only.logits[0])  # the first token comes from the prefill
    assert not all(torch.allclose(a, b) for a, b in zip(held.logits, prompt_only.logits))
    counts, _, _ = held_counts(llama, [(record, np.full(3, 12))], scorer, steps=40, interval=None)
    for k, stored in enumerate(counts):  # prompt-only: cut to 12 once, then one more token per step
        assert bool((stored == 12 + k).all()), k


# Not knorm: in the first layer a token's key norm does not depend on its position (RoPE keeps norms),
# so a token generated twice ties with itself, and a batched forward's rounding breaks that tie.
@pytest.mark.parametrize("name", ["snapkv", "h2o", "tova", "streaming", "keydiff", "learned", "ppo-policy"])
def test_batched_rows_hold_their_budgets_like_one_row_at_a_time(llama, scorers, name):
    scorer = next(s for s in scorers if s.name == name)
    records = [prefill(llama, random_prompt(n, seed=n), [scorer]) for n in (50, 75, 110)]
    rng = np.random.default_rng(2)
    floor = scorer.min_budget
    rows = [(r, rng.integers(floor, floor + 30, size=(3, 2))) for r in records for _ in range(2)]
    rows.append((records[0], np.array([floor + 70, floor + 2, floor + 9])))  # a layer whose budget exceeds the prompt
    settings = DecodeSettings(max_new_tokens=21, keep_logits=True)
    decode = DecodeEviction(3)
    batched = generate(llama, rows, scorer, settings, batch_size=len(rows), decode=decode)
    for row, together in zip(rows, batched):
        (alone,) = generate(llama, [row], scorer, settings, decode=decode)
        assert together.token_ids == alone.token_ids
        for a, b in zip(together.logits, alone.logits):
            torch.testing.assert_close(a, b, **LOGITS_CLOSE)
    assert_each_row_holds_its_budgets(llama, rows, scorer, steps=21, interval=3)


def held_counts(model, rows, scorer, steps: int, interval: int | None):
    """Decode ``rows`` under held budgets (``interval`` None: the prompt evicted only); before every
    forward, each (row, layer, head)'s stored tokens ``[steps, B, layers, Hkv]``, each layer's slots
    ``[steps, layers]``, and the cache."""
    counts, widths = [], []
    room = steps
    rows, cache = build_cache(model, rows, scorer, room, None if interval is None else DecodeEviction(interval))

    def before_forward(module, args, kwargs):
        cache = kwargs["past_key_values"]
        per_layer = [(v.sum(-1) if v is not None else torch.full(cache.keys[i].shape[:2], cache.used[i]))
                     for i, v in enumerate(cache.valid)]
        counts.append(torch.stack(per_layer, dim=1))  # [B, layers, Hkv]
        widths.append(list(cache.used))

    hook = model.register_forward_pre_hook(before_forward, with_kwargs=True)
    try:
        decode_batch(model, cache, [r for r, _ in rows], DecodeSettings(max_new_tokens=steps))
    finally:
        hook.remove()
    return torch.stack(counts), torch.tensor(widths), cache


def assert_each_row_holds_its_budgets(model, rows, scorer, steps: int, interval: int):
    """Each row alone, its cache sizes read before every forward: never above what it holds
    (``held_budgets``: adapted, a sliding layer's at most ``W - 1``) + ``interval - 1``, and that limit
    reached by every head whose held budget is below the prompt (budgets held, not skipped)."""
    from evolalloc.runtime.decode_eviction import held_budgets
    from evolalloc.runtime.support import sliding_windows

    for record, budgets in rows:
        counts, _, _ = held_counts(model, [(record, budgets)], scorer, steps, interval)
        held = torch.as_tensor(held_budgets([(record, budgets)], scorer, sliding_windows(model.config))[0])
        limit = held + interval - 1
        assert bool((counts[:, 0] <= limit).all())
        below = held < torch.as_tensor(record.layer_reach())[:, None]
        assert bool(below.any()) and torch.equal(counts[:, 0].amax(dim=0)[below], limit[below])


@pytest.mark.parametrize("interval", [1, 7])
def test_a_long_generation_never_stores_more_than_budget_plus_interval_minus_one(llama, interval):
    scorer = get_scorer("h2o", window=4)
    records = [prefill(llama, random_prompt(n, seed=n), [scorer]) for n in (150, 190)]
    per_head = np.array([[20, 9], [14, 14], [6, 31]])  # far below prompt + output
    per_layer = np.array([24, 8, 16])
    rows = [(records[0], per_head), (records[1], per_layer)]
    steps = 230
    counts, widths, cache = held_counts(llama, rows, scorer, steps, interval)
    assert counts.shape[0] == steps - 1  # one forward per generated token but the first
    budgets = torch.tensor(np.stack([per_head, np.repeat(per_layer[:, None], 2, axis=1)]))  # [B, layers, Hkv]
    for k, stored in enumerate(counts):
        # Before the k-th forward, k tokens were fed since the prompt; evictions every `interval` of them.
        assert torch.equal(stored, budgets + k % interval), k
    assert int(counts.max()) == int(budgets.max()) + interval - 1
    assert torch.equal(widths.max(dim=0).values, budgets.amax(dim=(0, 2)) + interval - 1)
    # The buffers were sized for the budgets, not for the output: one more slot for the token being fed.
    assert [k.shape[2] for k in cache.keys] == (budgets.amax(dim=(0, 2)) + interval).tolist()


def test_streaming_keeps_its_sinks_and_the_most_recent_tokens_at_their_original_positions(llama):
    scorer = get_scorer("streaming", sinks=4)
    record = prefill(llama, random_prompt(70, seed=4), [scorer])
    budget, steps, interval = 20, 33, 4
    rows, cache = build_cache(llama, [(record, np.full(3, budget))], scorer, steps, DecodeEviction(interval))
    decode_batch(llama, cache, [record], DecodeSettings(max_new_tokens=steps))
    # 32 tokens were fed (the last one is never fed), so the last eviction was after the 32nd: the
    # sequence is 70 + 32 long and holds its 4 sinks and its last 16 positions.
    expected = list(range(4)) + list(range(70 + 32 - 16, 70 + 32))
    for layer in range(3):
        assert cache.positions[layer][0].tolist() == [expected, expected]


def test_h2o_carries_the_prefills_accumulated_attention_into_decoding(llama):
    scorer = get_scorer("h2o", window=4)
    record = prefill(llama, random_prompt(50, seed=6), [scorer])
    _, cache = build_cache(llama, [(record, np.full(3, 30))], scorer, 8, DecodeEviction(8))
    sums = cache.held.capture.sums[1][0]  # [Hkv, 30]: the kept prompt tokens' sums, before any fed token
    positions = cache.positions[1][0]
    ranked, at = record.scores[scorer.key][1], record.rankings[scorer.key][1]
    for head in range(2):
        by_position = dict(zip(at[head].tolist(), ranked[head].tolist()))
        finite = [by_position[p] for p in positions[head].tolist() if np.isfinite(by_position[p])]
        assert sums[head].tolist()[: len(finite)] == pytest.approx(finite)
        assert float(sums[head].max()) == pytest.approx(max(finite))  # the recent window starts at the top


@pytest.mark.parametrize("name", ["retention-gates", "window", "random"])
def test_a_scorer_that_cannot_rank_generated_tokens_is_refused_in_one_line(scorers, name):
    scorer = next(s for s in scorers if s.name == name)
    assert not scorer.ranks_generated
    with pytest.raises(ValueError, match=f"scorer '{name}' cannot rank generated tokens") as err:
        check_decode_scorer(scorer)
    assert "\n" not in str(err.value) and "snapkv" in str(err.value)


def test_an_interval_below_one_is_refused():
    for bad in (0, -3, 1.5, True):
        with pytest.raises(ValueError, match="decode interval"):
            DecodeEviction.of(bad)
    assert DecodeEviction.of({"interval": 16}) == DecodeEviction(16) and DecodeEviction.of(None) is None


def test_an_adapted_method_holds_the_budgets_its_adapter_gave_each_prompt(llama):
    from evolalloc.runtime.adaptive import Adapted, get_adapter
    from evolalloc.runtime.compress import row_budgets

    adakv = Adapted(get_scorer("snapkv", window=4), get_adapter("adakv"))
    record = prefill(llama, random_prompt(120, seed=7), [adakv.scorer])
    given = np.full((3, 2), 16)
    adapted = torch.as_tensor(row_budgets(record, given, adakv))
    assert not torch.equal(adapted, torch.as_tensor(given))  # AdaKV moved budget between heads
    counts, _, _ = held_counts(llama, [(record, given)], adakv, steps=20, interval=4)
    for k, stored in enumerate(counts):
        assert torch.equal(stored[0], adapted + k % 4), k


def test_a_bounded_record_holds_its_budgets_as_the_full_record_does(llama):
    from evolalloc.runtime.bounded import bound_record

    scorer = get_scorer("h2o", window=4)  # its decoding starts from the prefill's sums: the bounded record's
    record = prefill(llama, random_prompt(90, seed=3), [scorer])
    budgets, settings = np.array([[20, 12], [30, 8], [16, 16]]), DecodeSettings(max_new_tokens=30, keep_logits=True)
    (full,) = generate(llama, [(record, budgets)], scorer, settings, decode=DecodeEviction(4))
    (bounded,) = generate(llama, [(bound_record(record, 32), budgets)], scorer, settings, decode=DecodeEviction(4))
    assert bounded.token_ids == full.token_ids
    assert all(torch.equal(a, b) for a, b in zip(bounded.logits, full.logits))


@pytest.mark.parametrize("architecture", ["mistral-sliding", "gemma2", "gemma3"])
def test_sliding_and_soft_capped_models_hold_their_budgets_row_by_row(architecture):
    model = tiny_model(architecture)
    scorer = get_scorer("snapkv", window=4)
    records = [prefill(model, random_prompt(n, seed=n), [scorer]) for n in (40, 70)]
    rows = [(records[0], np.array([[10, 6], [12, 12], [8, 20]])), (records[1], np.array([30, 8, 16]))]
    settings = DecodeSettings(max_new_tokens=30, keep_logits=True)
    batched = generate(model, rows, scorer, settings, batch_size=2, decode=DecodeEviction(3))
    for row, together in zip(rows, batched):
        (alone,) = generate(model, [row], scorer, settings, decode=DecodeEviction(3))
        assert together.token_ids == alone.token_ids
        for a, b in zip(together.logits, alone.logits):
            torch.testing.assert_close(a, b, **LOGITS_CLOSE)
    assert_each_row_holds_its_budgets(model, rows, scorer, steps=30, interval=3)
