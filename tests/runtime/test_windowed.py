"""The window scorer evaluates TensorRT-LLM's cyclic KV cache exactly: its cached, evicted
decoding equals recomputing the whole sequence at every step with per-layer sliding-window
attention (written here independently, eager), in the prefill and in the answer alike."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.runtime.decode import DecodeSettings, generate
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import random_prompt, tiny_model

WINDOWS: dict[int, int] = {}


def banded_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Eager attention where query i sees keys i - W < j <= i, W = WINDOWS[layer]."""
    n_rep = query.shape[1] // key.shape[1]
    key, value = key.repeat_interleave(n_rep, dim=1), value.repeat_interleave(n_rep, dim=1)
    n = query.shape[2]
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    allowed = (j <= i) & (i - j < WINDOWS[module.layer_idx])
    scores = (query @ key.transpose(-1, -2)) * scaling
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
    return (weights @ value).transpose(1, 2).contiguous(), None


def recompute_greedy(model, ids: list[int], windows, steps: int) -> list[int]:
    WINDOWS.clear()
    WINDOWS.update(enumerate(int(w) for w in windows))
    tokens = list(ids)
    with torch.no_grad():
        for _ in range(steps):
            logits = model(input_ids=torch.tensor([tokens]), use_cache=False).logits[0, -1]
            tokens.append(int(logits.argmax()))
    return tokens[len(ids):]


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def pair(request):
    from transformers import AttentionInterface

    AttentionInterface.register("banded_reference", banded_attention)
    return tiny_model(request.param), tiny_model(request.param, attn="banded_reference")


@pytest.mark.parametrize("question", [False, True])
def test_windowed_decoding_equals_recomputing_with_sliding_window_attention(pair, question):
    model, reference = pair
    scorer = get_scorer("window")
    rows, expected = [], []
    for length, windows in ((60, [12, 30, 7]), (45, [45, 9, 20]), (25, [40, 40, 40])):
        ids = random_prompt(length, seed=length)
        q = random_prompt(5, seed=99) if question else None
        record = prefill(model, ids, [scorer], question_ids=q)
        rows.append((record, np.repeat(np.array(windows)[:, None], 2, axis=1)))
        full = ids.tolist() + (q.tolist() if question else [])
        expected.append(recompute_greedy(reference, full, windows, steps=10))
    got = generate(model, rows, scorer, DecodeSettings(max_new_tokens=10), batch_size=3)
    assert [g.token_ids for g in got] == expected


def test_the_window_scorer_refuses_head_budgets_and_sinks(pair):
    model, _ = pair
    scorer = get_scorer("window")
    record = prefill(model, random_prompt(30), [scorer])
    with pytest.raises(ValueError, match="one window per layer"):
        generate(model, [(record, np.array([[8, 9], [8, 8], [8, 8]]))], scorer, DecodeSettings(max_new_tokens=2))
    with pytest.raises(ValueError, match="no sinks"):
        get_scorer("window", sinks=4)


def test_windows_as_long_as_the_prompt_change_nothing_before_the_answer_outgrows_them(pair):
    model, _ = pair
    ids = random_prompt(40, seed=3)
    window, full = get_scorer("window"), get_scorer("knorm")
    (a,) = generate(model, [(prefill(model, ids, [window]), np.full(3, 400))], window, DecodeSettings(max_new_tokens=6))
    (b,) = generate(model, [(prefill(model, ids, [full]), np.full(3, 400))], full, DecodeSettings(max_new_tokens=6))
    assert a.token_ids == b.token_ids


def test_the_likelihood_mode_scores_references_under_the_windows_too(pair):
    from evolalloc.runtime.likelihood import reference_logprobs

    model, reference = pair
    scorer = get_scorer("window")
    ids, answer, windows = random_prompt(50, seed=8), random_prompt(6, seed=9), [10, 33, 17]
    record = prefill(model, ids, [scorer])
    (ours,) = reference_logprobs(model, [(record, np.repeat(np.array(windows)[:, None], 2, axis=1), answer)], scorer)
    WINDOWS.clear()
    WINDOWS.update(enumerate(windows))
    with torch.no_grad():
        logits = reference(input_ids=torch.cat([ids, answer])[None], use_cache=False).logits[0, len(ids) - 1 : -1]
    expected = torch.log_softmax(logits.float(), dim=-1).gather(1, answer[:, None])[:, 0]
    torch.testing.assert_close(ours, expected, rtol=1e-4, atol=1e-4)
