"""The runtime is exact on every architecture it accepts: Llama (rope scaling), Mistral, Qwen2,
Qwen3 (q/k norms), Phi-3 (fused qkv), Gemma 2 (sliding windows, soft-capping, query scaling; a
cap that binds in "gemma2-softcap") and Gemma 3 (interleaved sliding and full layers, q/k norms),
in float32 and bfloat16. Real Gemma 3 weights: ``test_gemma3_real.py``.

Each reference is transformers' own eager model with the same weights: its greedy ``generate``
tokens and logits, and its attention probabilities (``output_attentions``) for SnapKV's scores.
Prompts are longer than the sliding window, so the window decides what a sliding layer sees.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.runtime.compress import compress
from evolalloc.runtime.decode import DecodeSettings, decode_batch
from evolalloc.runtime.model import geometry_of
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from evolalloc.runtime.scorers.base import LayerStats
from evolalloc.runtime.sliding import reachable_first
from tests.runtime.conftest import WINDOW, architectures, random_prompt, tiny_model

ARCHITECTURES = list(architectures())
SLIDING = [a for a in ARCHITECTURES if "gemma" in a or a.endswith("-sliding")]
PROMPT_LENGTH, STEPS = 70, 8
# bfloat16 keeps 8 bits of mantissa: logits of two kernels agree to about 1e-2 of their scale.
TOLERANCE = {torch.float32: dict(atol=2e-4, rtol=2e-4), torch.bfloat16: dict(atol=6e-2, rtol=6e-2)}


def stock_generate(model, prompt: torch.Tensor, steps: int):
    """transformers' greedy generate: (tokens, per-step logits ``[steps, V]`` float32)."""
    out = model.generate(prompt[None], max_new_tokens=steps, do_sample=False, output_logits=True,
                         return_dict_in_generate=True, eos_token_id=None, pad_token_id=0, min_new_tokens=steps)
    # On the host, where the runtime keeps its logits (the tests run on a GPU too: EVOLALLOC_TEST_DEVICE).
    return out.sequences[0, prompt.numel():].tolist(), torch.stack([step[0].float() for step in out.logits]).cpu()


def runtime_generate(model, prompt: torch.Tensor, budgets: np.ndarray, steps: int, scorer_name: str = "snapkv"):
    """The runtime's greedy decode on the compressed cache: (tokens, per-step logits, cache)."""
    scorer = get_scorer(scorer_name)
    record = prefill(model, prompt, [scorer])
    cache = compress(record, budgets, scorer, room=steps)
    kept = cache_kept(cache)
    generation = decode_batch(model, cache, [record], DecodeSettings(max_new_tokens=steps, keep_logits=True))[0]
    return generation.token_ids, torch.stack(generation.logits), kept


def assert_same_greedy(tokens, logits, expected_tokens, expected_logits, dtype) -> None:
    """Step by step: logits within the dtype's tolerance, and the same token — unless the stock
    model's own top two logits are closer than that tolerance (a tie within rounding, seen in
    bfloat16 on random weights); the sequences are compared up to such a tie only."""
    tolerance = TOLERANCE[dtype]
    assert len(tokens) == len(expected_tokens)
    for step, (token, expected) in enumerate(zip(tokens, expected_tokens)):
        torch.testing.assert_close(logits[step], expected_logits[step], **tolerance)
        if token != expected:
            top = expected_logits[step].topk(2).values
            margin = float(top[0] - top[1])
            assert dtype != torch.float32 and margin <= 2 * tolerance["atol"] * max(1.0, float(top[0].abs())), (
                f"step {step}: token {token} != {expected} with a margin of {margin}")
            return


def cache_kept(cache) -> np.ndarray:
    """``[layers, Hkv]`` valid slots of row 0 right after compression."""
    rows = []
    for layer, used in enumerate(cache.used):
        valid = cache.valid[layer]
        rows.append([used] * cache.keys[layer].shape[1] if valid is None else valid[0].sum(dim=-1).tolist())
    return np.array(rows)


def reach_budgets(model, length: int) -> np.ndarray:
    """Every token a layer can use: the whole prompt, or ``W - 1`` in a sliding layer."""
    geometry = geometry_of(model.config)
    caps = [length if cap is None else cap for cap in geometry.caps()]
    return np.repeat(np.array(caps)[:, None], geometry.num_kv_heads, axis=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_full_budgets_give_transformers_greedy_tokens_and_logits(architecture, dtype):
    ours = tiny_model(architecture, dtype=dtype)
    stock = tiny_model(architecture, attn="eager", dtype=dtype)
    prompt = random_prompt(PROMPT_LENGTH, seed=3)
    expected_tokens, expected_logits = stock_generate(stock, prompt, STEPS)
    budgets = np.full((3, 2), PROMPT_LENGTH)
    tokens, logits, _ = runtime_generate(ours, prompt, budgets, STEPS)
    assert_same_greedy(tokens, logits, expected_tokens, expected_logits, dtype)


@pytest.mark.parametrize("architecture", SLIDING)
def test_a_sliding_layer_evicted_to_its_window_still_gives_transformers_tokens(architecture):
    """Sliding layers keep only their last W - 1 tokens (slots no longer equal positions): the
    mask by original position must give exactly the stock model's answer."""
    ours, stock = tiny_model(architecture), tiny_model(architecture, attn="eager")
    prompt = random_prompt(PROMPT_LENGTH, seed=4)
    budgets = reach_budgets(ours, PROMPT_LENGTH)
    assert budgets.min() == WINDOW - 1 < PROMPT_LENGTH
    tokens, logits, kept = runtime_generate(ours, prompt, budgets, STEPS)
    expected_tokens, expected_logits = stock_generate(stock, prompt, STEPS)
    assert tokens == expected_tokens
    torch.testing.assert_close(logits, expected_logits, **TOLERANCE[torch.float32])
    np.testing.assert_array_equal(kept, budgets)


@pytest.mark.parametrize("architecture", SLIDING)
def test_the_window_changes_the_answer_so_these_tests_can_fail(architecture):
    stock = tiny_model(architecture, attn="eager")
    unwindowed = tiny_model(architecture, attn="eager", sliding_window=4 * PROMPT_LENGTH)
    prompt = random_prompt(PROMPT_LENGTH, seed=3)
    assert not torch.allclose(stock_generate(stock, prompt, 2)[1], stock_generate(unwindowed, prompt, 2)[1], atol=1e-4)


def test_the_soft_cap_changes_the_answer_so_these_tests_can_fail():
    stock = tiny_model("gemma2-softcap", attn="eager")
    uncapped = tiny_model("gemma2-softcap", attn="eager", attn_logit_softcapping=None)
    prompt = random_prompt(PROMPT_LENGTH, seed=3)
    assert stock_generate(stock, prompt, STEPS)[0] != stock_generate(uncapped, prompt, STEPS)[0]


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_every_layer_and_head_keeps_exactly_its_budget_capped_at_its_reach(architecture):
    model = tiny_model(architecture)
    prompt = random_prompt(PROMPT_LENGTH, seed=5)
    budgets = np.random.default_rng(0).integers(33, PROMPT_LENGTH + 10, size=(3, 2))  # snapkv keeps >= 32
    scorer = get_scorer("snapkv")
    cache = compress(prefill(model, prompt, [scorer]), budgets, scorer)
    np.testing.assert_array_equal(cache_kept(cache), np.minimum(budgets, reach_budgets(model, PROMPT_LENGTH)))


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_snapkv_scores_equal_those_of_the_stock_models_attention_probabilities(architecture):
    """The reference attention is transformers' eager softmax (post-norm, post-rope queries and
    keys, scaling, sliding window, soft-cap), read with ``output_attentions``."""
    ours, stock = tiny_model(architecture), tiny_model(architecture, attn="eager")
    prompt = random_prompt(PROMPT_LENGTH, seed=6)
    scorer = get_scorer("snapkv")
    record = prefill(ours, prompt, [scorer])
    with torch.no_grad():
        attentions = stock(prompt[None], output_attentions=True).attentions
    windows = geometry_of(ours.config).windows or [None] * 3
    for layer, probabilities in enumerate(attentions):
        stats = LayerStats(layer_idx=layer, keys=record.keys[layer], values=record.values[layer],
                           window_attention=probabilities[0, :, -scorer.window:, :].float())
        ranking, scores = reachable_first(*scorer.rank_scored(stats), PROMPT_LENGTH, windows[layer])
        torch.testing.assert_close(record.scores[scorer.key][layer], scores, atol=1e-5, rtol=1e-4)
        finite = torch.isfinite(scores)
        assert torch.equal(record.rankings[scorer.key][layer][finite], ranking[finite])


def test_a_multimodal_gemma3_checkpoint_runs_its_text_model_exactly():
    """Gemma 3 4B/12B/27B checkpoints are ``Gemma3ForConditionalGeneration``: the text model's
    config sits in ``text_config``; text prompts go through it unchanged."""
    import transformers as T

    from evolalloc.runtime.model import prepare_model
    from tests.runtime.conftest import GEMMA, TINY

    def build(attn):
        text = {**TINY, **GEMMA, "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]}
        vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                      patch_size=14)
        torch.manual_seed(0)
        model = T.Gemma3ForConditionalGeneration(T.Gemma3Config(text_config=text, vision_config=vision,
                                                                mm_tokens_per_image=4)).eval()
        prepare_model(model, "gemma3-multimodal") if attn == "evolalloc" else model.set_attn_implementation(attn)
        return model

    ours, stock = build("evolalloc"), build("eager")
    prompt = random_prompt(PROMPT_LENGTH, seed=7)
    tokens, logits, _ = runtime_generate(ours, prompt, reach_budgets(ours, PROMPT_LENGTH), STEPS)
    expected_tokens, expected_logits = stock_generate(stock, prompt, STEPS)
    assert_same_greedy(tokens, logits, expected_tokens, expected_logits, torch.float32)


@pytest.mark.parametrize("architecture", ["gemma3", "mistral-sliding"])
def test_a_prompt_within_the_window_still_slides_while_decoding(architecture):
    """No window binds at prefill (20 tokens < 24), yet decoding 12 more pushes the first tokens out:
    the cache must still know positions."""
    ours, stock = tiny_model(architecture), tiny_model(architecture, attn="eager")
    prompt = random_prompt(20, seed=8)
    tokens, logits, _ = runtime_generate(ours, prompt, np.full((3, 2), 20), 12, scorer_name="knorm")
    expected_tokens, expected_logits = stock_generate(stock, prompt, 12)
    assert_same_greedy(tokens, logits, expected_tokens, expected_logits, torch.float32)
