"""The runtime is exact on real Gemma 3 weights (``bundled:gemma3-270m``: 15 sliding layers of window
512, 3 global ones, q/k norms, ``query_pre_attn_scalar``), not only on tiny random models.

The prompt is a RULER needle in the bundled prose, 640 tokens: longer than the window, so a sliding
layer sees only its last 512 positions and the window decides the answer. Each reference is
transformers' own eager model loaded from the same converted folder: its greedy ``generate`` tokens
and logits, and its attention probabilities (``output_attentions``) for SnapKV's scores. Gemma 3
has no logit soft-capping (its config's ``attn_logit_softcapping`` is null, tested below), so these
tests cannot see that path: the tiny Gemma 2 of ``test_architectures.py`` covers it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from evolalloc.runtime.model import geometry_of, resolve_model_folder
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from evolalloc.runtime.scorers.base import LayerStats
from evolalloc.runtime.sliding import reachable_first
from tests.runtime.test_architectures import TOLERANCE, reach_budgets, runtime_generate, stock_generate

pytestmark = pytest.mark.real_model

SPEC = "bundled:gemma3-270m"
WINDOW, CONTEXT = 512, 640
STEPS = 10  # ": " and the 7 digits of the needle, then the full stop


def stock_model(dtype: torch.dtype, **overrides):
    """transformers' eager Gemma 3 from the same converted folder as ``load_model``'s."""
    from transformers import AutoModelForCausalLM

    folder = resolve_model_folder(SPEC)
    return AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="eager", **overrides).eval()


@pytest.fixture(scope="module")
def needle(gemma):
    """``(token ids [L], the needle's 7 digits)`` of one search-split prompt of ~640 tokens."""
    from fitness import get_task

    task = get_task("niah_single", needle_type="number", haystack="prose")
    (instance,) = task.instances("search", 1, 0, CONTEXT, gemma.tokenizer)
    return torch.tensor(gemma.tokenizer.encode(instance.prompt)), instance.references[0]


@pytest.fixture(scope="module")
def stock():
    return stock_model(torch.float32)


@pytest.fixture(scope="module")
def reference(stock, needle):
    """transformers' greedy answer in float32: (tokens, per-step logits ``[STEPS, V]``)."""
    return stock_generate(stock, needle[0], STEPS)


def test_the_prompt_outgrows_the_window_and_transformers_answers_the_needle(gemma, needle, reference):
    ids, digits = needle
    assert geometry_of(gemma.model.config).windows.count(WINDOW) == 15 and ids.numel() > WINDOW
    assert digits in gemma.tokenizer.decode(reference[0])


def test_the_converted_model_is_cached_without_a_copy_of_the_assembled_file(gemma):
    from evolalloc.core.paths import cache_dir

    folder = resolve_model_folder(SPEC)
    assert folder.parent == cache_dir() / "models" and (folder / "model.safetensors").is_file()
    assert [p.name for p in folder.parent.iterdir() if "gemma-3-270m" in p.name] == [folder.name]


def test_gemma3_has_no_soft_capping_so_the_tiny_gemma2_tests_cover_that_path(gemma):
    config = gemma.model.config
    assert config.attn_logit_softcapping is None and config.final_logit_softcapping is None


def test_full_budgets_give_transformers_tokens_and_logits_in_float32(gemma, needle, reference):
    ids = needle[0]
    tokens, logits, _ = runtime_generate(gemma.model, ids, np.full((18, 1), ids.numel()), STEPS)
    assert tokens == reference[0]
    torch.testing.assert_close(logits, reference[1], **TOLERANCE[torch.float32])


def test_sliding_layers_evicted_to_their_window_keep_transformers_answer(gemma, needle, reference):
    """Each sliding layer keeps 511 of the 640 tokens (slots are no longer positions), the global
    layers all of them: the mask by original position must give the stock model's answer exactly."""
    ids = needle[0]
    budgets = reach_budgets(gemma.model, ids.numel())
    tokens, logits, kept = runtime_generate(gemma.model, ids, budgets, STEPS)
    assert sorted(set(budgets.ravel().tolist())) == [WINDOW - 1, ids.numel()]
    np.testing.assert_array_equal(kept, budgets)
    assert tokens == reference[0]
    torch.testing.assert_close(logits, reference[1], **TOLERANCE[torch.float32])


def test_the_window_changes_transformers_answer_so_these_tests_can_fail(needle, reference):
    unwindowed = stock_model(torch.float32, sliding_window=4 * CONTEXT)
    _, logits = stock_generate(unwindowed, needle[0], 2)
    assert not torch.allclose(logits, reference[1][:2], atol=1.0)


def bfloat16_ulp(value: float) -> float:
    """The spacing of bfloat16 numbers at ``value`` (8 bits of mantissa: 0.125 between 16 and 32)."""
    return 2.0 ** (math.floor(math.log2(abs(value))) - 7)


def test_full_budgets_give_transformers_tokens_and_logits_in_bfloat16(needle):
    """In bfloat16 the two kernels round differently through 18 layers: every logit (the largest
    ~25) stays within 8 ulps of the largest (1.0; measured: at most 0.5), and the greedy tokens are
    identical (the stock model's top two logits are at least 0.44 apart at every step here)."""
    from evolalloc.runtime.model import load_model

    ours, stock = load_model(SPEC, dtype="bfloat16"), stock_model(torch.bfloat16)
    ids = needle[0]
    expected_tokens, expected_logits = stock_generate(stock, ids, STEPS)
    tokens, logits, _ = runtime_generate(ours.model, ids, np.full((18, 1), ids.numel()), STEPS)
    assert tokens == expected_tokens
    atol = 8 * bfloat16_ulp(float(expected_logits.abs().max()))
    torch.testing.assert_close(logits, expected_logits, atol=atol, rtol=0)


@pytest.mark.parametrize("params", [{}, {"window": 32, "kernel": 7, "pooling": "avg", "pool_window": False}],
                         ids=["default", "quickstart"])
def test_snapkv_scores_equal_those_of_transformers_attention_probabilities(gemma, stock, needle, params):
    """The reference attention is the stock model's eager softmax (post-norm, post-rope queries and
    keys, ``query_pre_attn_scalar``, the window), read with ``output_attentions``."""
    ids = needle[0]
    scorer = get_scorer("snapkv", **params)
    record = prefill(gemma.model, ids, [scorer])
    with torch.no_grad():
        attentions = stock(ids[None], output_attentions=True, logits_to_keep=1).attentions
    windows = geometry_of(gemma.model.config).windows
    for layer, probabilities in enumerate(attentions):
        stats = LayerStats(layer_idx=layer, keys=record.keys[layer], values=record.values[layer],
                           window_attention=probabilities[0, :, -scorer.window:, :].float())
        ranking, scores = reachable_first(*scorer.rank_scored(stats), ids.numel(), windows[layer])
        torch.testing.assert_close(record.scores[scorer.key][layer], scores, atol=1e-5, rtol=1e-4)
        finite = torch.isfinite(scores)
        assert torch.equal(record.rankings[scorer.key][layer][finite], ranking[finite])
