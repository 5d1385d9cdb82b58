"""Teacher-forced scoring is exact: full budgets give the stock model's probabilities of the
reference, batching gives what one row at a time gives, and the question-after-compression path
is the same chunk with the question in front."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.runtime.likelihood import (
    best_reference_score,
    reference_logprobs,
    reference_logprobs_batch,
    reference_score,
)
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import DEVICE, LOGITS_CLOSE, random_prompt, tiny_model


def stock_logprobs(model, prompt: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """The stock model's teacher-forced log-probabilities ``[r]`` of ``reference`` after ``prompt``."""
    ids = torch.cat([prompt, reference])[None]
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    logp = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
    return logp.gather(1, reference[:, None])[:, 0]


@pytest.mark.parametrize("architecture", ["llama", "qwen2"])
def test_full_budgets_give_the_stock_models_teacher_forced_probabilities(architecture, scorers):
    model, stock = tiny_model(architecture), tiny_model(architecture, attn="sdpa")
    prompt = random_prompt(90, seed=1)
    record = prefill(model, prompt, scorers)
    references = [random_prompt(n, seed=20 + n) for n in (1, 2, 6)]
    for scorer in scorers:
        rows = [(record, np.full((3, 2), 200), ref) for ref in references]  # more than the prompt: nothing evicted
        for ours, ref in zip(reference_logprobs(model, rows, scorer), references):
            # ours come back on the host; on a GPU the two paths' kernels differ, so its logit tolerance there
            torch.testing.assert_close(ours, stock_logprobs(stock, prompt, ref).cpu(),
                                       **(dict(rtol=1e-5, atol=1e-5) if DEVICE.type == "cpu" else LOGITS_CLOSE))


def test_batched_rows_score_like_one_row_at_a_time(llama):
    scorer = get_scorer("snapkv", window=8)
    records = [prefill(llama, random_prompt(n, seed=n), [scorer]) for n in (70, 95, 130)]
    rng = np.random.default_rng(1)
    rows = []
    for k, record in enumerate(records):
        for ref_len in (1, 3, 7):  # several references per instance, of different lengths
            per_head = rng.integers(8, 50, size=(3, 2))  # per-head budgets differ per row
            rows.append((record, per_head, random_prompt(ref_len, seed=100 * k + ref_len)))
    rows.append((records[0], np.array([9, 40, 17]), random_prompt(4, seed=7)))  # per-layer budgets
    together = reference_logprobs_batch(llama, rows, scorer)
    for row, batched in zip(rows, together):
        (alone,) = reference_logprobs_batch(llama, [row], scorer)
        assert batched.shape == (len(row[2]),)
        torch.testing.assert_close(batched, alone, rtol=1e-5, atol=1e-5)
    # Batches of any size give the same numbers as one batch.
    for a, b in zip(reference_logprobs(llama, rows, scorer, batch_size=4), together):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_eviction_changes_the_probabilities(llama):
    scorer = get_scorer("snapkv", window=8)
    record = prefill(llama, random_prompt(120, seed=3), [scorer])
    ref = random_prompt(5, seed=4)
    full, tight = reference_logprobs(llama, [(record, np.full(3, 500), ref), (record, np.full(3, 9), ref)], scorer)
    assert not torch.allclose(full, tight, atol=1e-3)
    # The first token is predicted by the prefill, before any eviction.
    assert full[0] == tight[0]


def test_with_a_question_after_compression_the_question_leads_the_chunk(llama):
    context, question, ref = random_prompt(70, seed=9), random_prompt(5, seed=10), random_prompt(4, seed=11)
    scorer = get_scorer("snapkv", window=4)
    split = prefill(llama, context, [scorer], question_ids=question)
    whole = prefill(llama, torch.cat([context, question]), [scorer])
    (a,) = reference_logprobs(llama, [(split, np.full(3, 500), ref)], scorer)
    (b,) = reference_logprobs(llama, [(whole, np.full(3, 500), ref)], scorer)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    # Under eviction, rows of different question lengths batch like one at a time.
    records = [prefill(llama, random_prompt(n, seed=n), [scorer], question_ids=random_prompt(q, seed=q + 50))
               for n, q in ((80, 3), (100, 7))]
    rows = [(r, np.array([[20, 35], [50, 12], [28, 44]]), random_prompt(m, seed=m)) for r in records for m in (1, 5)]
    for row, together in zip(rows, reference_logprobs_batch(llama, rows, scorer)):
        torch.testing.assert_close(together, reference_logprobs_batch(llama, [row], scorer)[0], rtol=1e-5, atol=1e-5)


def test_a_row_without_reference_tokens_is_refused(llama):
    scorer = get_scorer("knorm")
    record = prefill(llama, random_prompt(40, seed=1), [scorer])
    with pytest.raises(ValueError, match="at least one token"):
        reference_logprobs(llama, [(record, np.full(3, 20), torch.tensor([], dtype=torch.long))], scorer)


def test_the_score_is_the_mean_token_probability_and_the_best_reference_counts():
    sure, half = torch.log(torch.tensor([1.0, 1.0])), torch.log(torch.tensor([1.0, 0.5, 0.0]))
    assert reference_score(sure) == pytest.approx(1.0)
    assert reference_score(half) == pytest.approx(0.5)
    assert best_reference_score([half, sure]) == pytest.approx(1.0)
