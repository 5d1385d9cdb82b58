"""A prompt prefilled in chunks gives the record of a one-shot prefill (up to float rounding),
with no attention call over more queries than a chunk."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from evolalloc.runtime.capture import CaptureSpec, PrefillCapture
from evolalloc.runtime.chunked import prefill_forward
from evolalloc.runtime.prefill import prefill
from tests.runtime.conftest import random_prompt

TOL = dict(rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("length, chunk", [(290, 40), (300, 64), (129, 128)])
def test_a_chunked_prefill_gives_the_one_shot_record(llama, scorers, length, chunk):
    # 290 / 40: the last chunk (10 tokens) is shorter than SnapKV's 32-query window, so the
    # window's rows come from two chunks; 129 / 128: one token in the last chunk.
    ids = random_prompt(length, seed=length)
    whole = prefill(llama, ids, scorers, chunk_size=length)
    chunked = prefill(llama, ids, scorers, chunk_size=chunk)
    assert chunked.length == whole.length == length
    torch.testing.assert_close(chunked.first_logits, whole.first_logits, **TOL)
    for layer in range(whole.num_layers):
        torch.testing.assert_close(chunked.keys[layer], whole.keys[layer], **TOL)
        torch.testing.assert_close(chunked.values[layer], whole.values[layer], **TOL)
    assert set(chunked.rankings) == set(whole.rankings) == {s.key for s in scorers}
    for key in whole.rankings:
        torch.testing.assert_close(chunked.scores[key], whole.scores[key], rtol=1e-4, atol=1e-6)
        _assert_same_order_up_to_rounding(chunked.rankings[key], whole.rankings[key], whole.scores[key], key)
    torch.testing.assert_close(chunked.dispersion, whole.dispersion, **TOL)


def _assert_same_order_up_to_rounding(ranking, reference, scores, key):
    """The same ranking, except that tokens whose scores tie up to float rounding may swap places (with 2
    threads a matmul's summation order differs between chunked and one-shot prefill, and KNorm's near-equal
    key norms then swap). Where the two differ, the tokens in that place must score the same up to rounding.
    Shapes: rankings ``[layers, Hkv, L]``; ``scores`` the reference's, in its ranking order (as records keep them).
    """
    assert torch.equal(ranking.sort(dim=-1).values, reference.sort(dim=-1).values), key
    differ = ranking != reference
    assert differ.float().mean() < 0.05, f"{key}: more than near-ties swapped"
    by_position = torch.empty_like(scores).scatter_(-1, reference, scores)  # [layers, Hkv, L]: each token's score
    ours, theirs = by_position.gather(-1, ranking)[differ].double(), scores[differ].double()
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-6, msg=lambda m: f"{key}: {m}")


def test_chunked_capture_records_the_same_window_rows_and_attention_sums(llama):
    ids = random_prompt(200, seed=3)[None]
    spec = CaptureSpec(window_queries=48, attention_sum=True)
    whole, chunked = PrefillCapture(spec), PrefillCapture(spec)
    prefill_forward(llama, ids, whole, chunk_size=200)
    prefill_forward(llama, ids, chunked, chunk_size=30)  # the 48-query window spans 3 chunks
    for layer in range(llama.config.num_hidden_layers):
        assert chunked.window_attention[layer].shape == (4, 48, 200)
        torch.testing.assert_close(chunked.window_attention[layer], whole.window_attention[layer], **TOL)
        torch.testing.assert_close(chunked.attention_sums[layer], whole.attention_sums[layer], rtol=1e-4, atol=1e-4)


def test_the_windowed_prefill_in_chunks_matches_one_shot(llama):
    ids = random_prompt(150, seed=4)[None]
    windows = [16, 40, 150]
    whole, chunked = PrefillCapture(), PrefillCapture()
    one_shot = prefill_forward(llama, ids, whole, chunk_size=150, windows=windows)
    in_chunks = prefill_forward(llama, ids, chunked, chunk_size=32, windows=windows)
    torch.testing.assert_close(in_chunks, one_shot, **TOL)
    for layer in range(3):
        torch.testing.assert_close(chunked.keys[layer], whole.keys[layer], **TOL)


def test_no_attention_call_sees_more_queries_than_a_chunk(llama, monkeypatch):
    seen = []
    sdpa = F.scaled_dot_product_attention

    def spy(query, key, value, *args, **kwargs):
        seen.append((query.shape[2], key.shape[2]))
        return sdpa(query, key, value, *args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    from evolalloc.runtime.scorers import get_scorer

    record = prefill(llama, random_prompt(260, seed=5), [get_scorer("snapkv"), get_scorer("h2o")], chunk_size=50)
    assert record.length == 260
    assert max(q for q, _ in seen) == 50  # the attention's score matrix is at most 50 x L per head
    assert max(k for _, k in seen) == 260


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_a_chunk_size_that_is_not_a_positive_integer_is_refused(llama, bad):
    with pytest.raises(ValueError, match="chunk_size"):
        prefill(llama, random_prompt(20), [], chunk_size=bad)


@pytest.mark.parametrize("chunk", [300, 20])  # 20: the 32-query window spans two chunks
def test_each_layer_is_handed_over_once_with_its_capture_complete(llama, chunk):
    # The prefill ranks a layer in this call and drops its window rows, so the call must come
    # exactly once per layer and only when every key and window row is there.
    ids = random_prompt(300, seed=6)[None]
    done = []
    capture = PrefillCapture(CaptureSpec(window_queries=32, attention_sum=True),
                             on_layer_done=lambda layer: done.append((layer, capture.keys[layer].shape[1],
                                                                      capture.window_attention[layer][:,
                                                                                                      0].sum().item())))
    prefill_forward(llama, ids, capture, chunk_size=chunk)
    assert [(layer, n) for layer, n, _ in done] == [(0, 300), (1, 300), (2, 300)]
    # the first window row of 4 query heads sums to 1 each
    assert all(mass == pytest.approx(4.0) for _, _, mass in done)


def test_by_default_short_prompts_take_one_forward_and_long_ones_default_chunks(llama, monkeypatch):
    from evolalloc.runtime import chunked

    monkeypatch.setattr(chunked, "ONE_SHOT_TOKENS", 100)
    monkeypatch.setattr(chunked, "DEFAULT_CHUNK_SIZE", 30)
    queries = []
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention",
                        lambda q, *a, **k: queries.append(q.shape[2]) or sdpa(q, *a, **k))
    prefill(llama, random_prompt(100, seed=7), [])
    assert set(queries) == {100}
    queries.clear()
    prefill(llama, random_prompt(101, seed=7), [])
    assert sorted(set(queries)) == [11, 30]  # 30 + 30 + 30 + 11
