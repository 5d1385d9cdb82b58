"""Teacher-forcing under held budgets gives the probabilities generation computes: the one-chunk path's
when nothing is evicted, and generation's own logits for the tokens it produced under eviction."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.runtime.decode import DecodeSettings, generate
from evolalloc.runtime.held_likelihood import held_logprobs, held_logprobs_batch
from evolalloc.runtime.likelihood import reference_logprobs_batch
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import random_prompt

SCORER = get_scorer("snapkv", window=4)


@pytest.mark.parametrize("interval", [1, 4])
@pytest.mark.parametrize("with_question", [False, True])
def test_budgets_that_hold_everything_give_the_one_chunk_probabilities(llama, interval, with_question):
    records = [prefill(llama, random_prompt(n, seed=n), [SCORER],
                       question_ids=random_prompt(q, seed=q + 40) if with_question else None)
               for n, q in ((60, 3), (85, 6))]
    rows = [(r, np.full((3, 2), 200), random_prompt(m, seed=m)) for r in records for m in (1, 2, 9)]
    held = held_logprobs_batch(llama, rows, SCORER, DecodeEviction(interval))
    for ours, theirs in zip(held, reference_logprobs_batch(llama, rows, SCORER)):
        assert ours.logprobs is None
        torch.testing.assert_close(ours.token_logprobs, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["snapkv", "h2o", "tova", "streaming"])
@pytest.mark.parametrize("with_question", [False, True])
def test_teacher_forcing_a_generated_answer_gives_the_logits_generation_computed_under_eviction(llama, name,
                                                                                               with_question):
    scorer = get_scorer(name, window=4) if name in ("snapkv", "h2o") else get_scorer(name)
    records = [prefill(llama, random_prompt(n, seed=n + 1), [scorer],
                       question_ids=random_prompt(q, seed=q) if with_question else None)
               for n, q in ((70, 2), (96, 7))]
    rows = [(records[0], np.array([[14, 6], [9, 22], [12, 12]])), (records[1], np.array([8, 17, 30]))]
    decode = DecodeEviction(3)
    generated = generate(llama, rows, scorer, DecodeSettings(max_new_tokens=25, keep_logits=True), decode=decode)
    forced = held_logprobs(llama, [(r, b, torch.tensor(g.token_ids)) for (r, b), g in zip(rows, generated)], scorer,
                           decode, batch_size=2)
    for gen, teacher in zip(generated, forced):
        expected = torch.stack([torch.log_softmax(logits, dim=-1)[token]
                                for logits, token in zip(gen.logits, gen.token_ids)])
        torch.testing.assert_close(teacher.token_logprobs, expected, rtol=1e-4, atol=1e-4)
    # ... which is not what the prompt-only teacher-forcing computes
    (prompt_only,) = reference_logprobs_batch(llama, [(rows[0][0], rows[0][1], torch.tensor(generated[0].token_ids))],
                                              scorer)
    assert not torch.allclose(prompt_only, forced[0].token_logprobs, atol=1e-3)


def test_the_whole_distribution_comes_back_when_asked(llama):
    record = prefill(llama, random_prompt(64, seed=8), [SCORER])
    reference = random_prompt(11, seed=9)
    (out,) = held_logprobs_batch(llama, [(record, np.full(3, 10), reference)], SCORER, DecodeEviction(4),
                                 distribution=True)
    assert out.logprobs.shape == (11, 128)
    torch.testing.assert_close(out.logprobs.exp().sum(dim=-1), torch.ones(11))
    torch.testing.assert_close(out.logprobs.gather(1, reference.cpu()[:, None])[:, 0], out.token_logprobs)
    assert torch.equal(out.top1, out.logprobs.argmax(dim=-1) == reference.cpu())


def test_an_empty_continuation_and_a_scorer_that_cannot_rank_generated_tokens_are_refused(llama):
    record = prefill(llama, random_prompt(40, seed=1), [SCORER, get_scorer("random")])
    with pytest.raises(ValueError, match="at least one token"):
        held_logprobs(llama, [(record, np.full(3, 20), torch.tensor([], dtype=torch.long))], SCORER, DecodeEviction(2))
    with pytest.raises(ValueError, match="cannot rank generated tokens"):
        held_logprobs(llama, [(record, np.full(3, 20), random_prompt(5))], get_scorer("random"), DecodeEviction(2))
