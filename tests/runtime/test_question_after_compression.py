"""The query-agnostic setting: the question is fed as one chunk after eviction, on layers whose
lengths differ. The chunk's causal mask must make it equal to feeding one token at a time."""

from __future__ import annotations

import numpy as np
import torch

from evolalloc.runtime.compress import compress
from evolalloc.runtime.decode import DecodeSettings, generate
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import random_prompt

BUDGETS = np.array([[20, 35], [50, 50], [28, 44]])  # per-layer lengths differ, heads padded


def one_token_at_a_time(model, record, budgets, scorer) -> torch.Tensor:
    cache = compress(record, budgets, scorer, room=len(record.question_ids))
    logits = None
    for offset, token in enumerate(record.question_ids.tolist()):
        out = model(
            input_ids=torch.tensor([[token]]),
            position_ids=torch.tensor([[record.length + offset]]),
            past_key_values=cache, use_cache=True, evolalloc_cache=cache,
        )
        logits = out.logits[0, -1]
    return logits


def test_a_question_chunk_gives_the_same_logits_as_one_token_at_a_time(llama):
    scorer = get_scorer("knorm")
    record = prefill(llama, random_prompt(90, seed=7), [scorer], question_ids=random_prompt(6, seed=8))
    (chunked,) = generate(llama, [(record, BUDGETS)], scorer, DecodeSettings(max_new_tokens=1, keep_logits=True))
    torch.testing.assert_close(chunked.logits[0], one_token_at_a_time(llama, record, BUDGETS, scorer), rtol=1e-4,
                               atol=1e-5)


def test_questions_of_different_lengths_batch_like_one_at_a_time(llama):
    scorer = get_scorer("streaming")
    records = [
        prefill(llama, random_prompt(n, seed=n), [scorer], question_ids=random_prompt(q, seed=q + 100))
        for n, q in ((80, 3), (100, 7), (64, 5))
    ]
    settings = DecodeSettings(max_new_tokens=6, keep_logits=True)
    rows = [(r, BUDGETS) for r in records]
    together = generate(llama, rows, scorer, settings, batch_size=3)
    for row, gen in zip(rows, together):
        (alone,) = generate(llama, [row], scorer, settings)
        assert gen.token_ids == alone.token_ids
        torch.testing.assert_close(gen.logits[0], alone.logits[0], rtol=1e-4, atol=1e-5)


def test_with_full_budgets_the_question_chunk_equals_prefilling_the_whole_prompt(llama):
    context, question = random_prompt(70, seed=9), random_prompt(5, seed=10)
    scorer = get_scorer("snapkv", window=4)
    split = prefill(llama, context, [scorer], question_ids=question)
    whole = prefill(llama, torch.cat([context, question]), [scorer])
    settings = DecodeSettings(max_new_tokens=5, keep_logits=True)
    (a,) = generate(llama, [(split, np.full(3, 500))], scorer, settings)
    (b,) = generate(llama, [(whole, np.full(3, 500))], scorer, settings)
    assert a.token_ids == b.token_ids
    torch.testing.assert_close(a.logits[0], b.logits[0], rtol=1e-4, atol=1e-5)
