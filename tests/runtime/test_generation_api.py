"""evolalloc.generate is the evaluation path as a library call: same tokens as the runtime's own
decode, stock greedy generate() with full budgets, batching- and seed-independent."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import evolalloc
from evolalloc.core.allocation import Allocation
from evolalloc.core.errors import UserError
from evolalloc.runtime.decode import DecodeSettings
from evolalloc.runtime.decode import generate as runtime_generate
from evolalloc.runtime.model import geometry_of
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.sampling import filter_logits
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import tiny_model

ARCHITECTURES = ["llama", "mistral", "qwen2"]


class CharTokenizer:
    """A tokenizer for the tiny 128-token models: one id per character (ids 3..127), EOS = 2."""

    eos_token_id = 2

    def encode(self, text, add_special_tokens=True):
        return [3 + ord(c) % 125 for c in text]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(97 + (int(i) - 3) % 26) for i in ids
                       if not (skip_special_tokens and int(i) == self.eos_token_id))


TOKENIZER = CharTokenizer()
PROMPTS = ["the pass key is 71432. " * 6 + "what is it?", "short one", "x" * 150 + " and a tail of text"]


@pytest.fixture(scope="module", params=ARCHITECTURES)
def model(request):
    return tiny_model(request.param)


def test_generate_returns_the_tokens_of_the_evaluation_path(model):
    scorer = get_scorer("snapkv", window=8)
    budgets = np.array([[20, 12], [9, 30], [16, 16]])
    out = evolalloc.generate(model, TOKENIZER, PROMPTS, budgets, scorer=scorer, max_new_tokens=7)
    settings = DecodeSettings(max_new_tokens=7, eos_ids=(2,))
    for prompt, tokens in zip(PROMPTS, out.token_ids):
        record = prefill(model, TOKENIZER.encode(prompt), [scorer])
        (reference,) = runtime_generate(model, [(record, budgets)], scorer, settings, TOKENIZER)
        assert tokens == reference.token_ids


def test_question_after_compression_matches_the_evaluation_path(model):
    scorer = get_scorer("knorm")
    pairs = [("some long context " * 8, "the question?"), ("ctx " * 30, "q")]
    out = evolalloc.generate(model, TOKENIZER, pairs, np.full(3, 24), scorer=scorer, max_new_tokens=5,
                             question_after_compression=True)
    for (context, question), tokens in zip(pairs, out.token_ids):
        record = prefill(model, TOKENIZER.encode(context), [scorer], question_ids=TOKENIZER.encode(question))
        (reference,) = runtime_generate(model, [(record, np.full(3, 24))], scorer,
                                        DecodeSettings(max_new_tokens=5, eos_ids=(2,)))
        assert tokens == reference.token_ids


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_full_budgets_give_the_tokens_of_transformers_greedy_generate(architecture):
    model, stock = tiny_model(architecture), tiny_model(architecture, attn="sdpa")
    out = evolalloc.generate(model, TOKENIZER, PROMPTS, np.full(3, 4096 // 8), max_new_tokens=9)
    for prompt, tokens in zip(PROMPTS, out.token_ids):
        ids = torch.tensor([TOKENIZER.encode(prompt)], device=stock.device)
        reference = stock.generate(ids, max_new_tokens=9, do_sample=False, eos_token_id=2, pad_token_id=0)
        assert tokens == reference[0, ids.shape[1]:].tolist()


def test_the_model_keeps_its_attention_implementation():
    stock = tiny_model("llama", attn="sdpa")
    evolalloc.generate(stock, TOKENIZER, "hello there", np.full(3, 8), max_new_tokens=2, scorer="knorm")
    assert stock.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("sampling", [False, True])
def test_batched_prompts_give_what_each_prompt_gives_alone(model, sampling):
    options = dict(max_new_tokens=8, do_sample=sampling, temperature=0.9, top_p=0.9, seed=5,
                   scorer=get_scorer("snapkv", window=8))
    budgets = np.array([10, 20, 14])
    together = evolalloc.generate(model, TOKENIZER, PROMPTS, budgets, batch_size=3, **options)
    for i, prompt in enumerate(PROMPTS):
        alone = evolalloc.generate(model, TOKENIZER, [prompt], budgets, batch_size=1, **dict(options, seed=5 + i))
        assert alone.token_ids[0] == together.token_ids[i]


def test_sampling_is_seeded_and_reproducible(model):
    options = dict(max_new_tokens=12, do_sample=True, temperature=1.5, scorer="knorm")
    first = evolalloc.generate(model, TOKENIZER, PROMPTS, np.full(3, 16), seed=11, **options)
    again = evolalloc.generate(model, TOKENIZER, PROMPTS, np.full(3, 16), seed=11, **options)
    other = evolalloc.generate(model, TOKENIZER, PROMPTS, np.full(3, 16), seed=12, **options)
    greedy = evolalloc.generate(model, TOKENIZER, PROMPTS, np.full(3, 16), max_new_tokens=12, scorer="knorm")
    assert first.token_ids == again.token_ids
    assert first.token_ids != other.token_ids
    assert first.token_ids != greedy.token_ids


def test_top_p_keeps_the_smallest_set_reaching_p_and_top_k_the_k_largest():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert (filter_logits(logits, top_p=0.8)[0] > 0).tolist() == [True, True, False, False]
    assert (filter_logits(logits, top_p=0.81)[0] > 0).tolist() == [True, True, True, False]
    assert (filter_logits(logits, top_k=1)[0] > 0).tolist() == [True, False, False, False]
    torch.testing.assert_close(filter_logits(logits)[0], torch.tensor([0.5, 0.3, 0.15, 0.05]))


def test_budgets_beyond_the_prompt_are_clipped_and_the_result_says_so(model):
    out = evolalloc.generate(model, TOKENIZER, ["tiny", "x" * 100], np.full(3, 40), max_new_tokens=2, scorer="knorm")
    assert out.budgets[0].max() == 4 and out.budgets[1].max() == 40
    assert "clipped to 4" in out.notes[0] and out.notes[1] == ""
    assert out.kv_bytes[1].actual < out.kv_bytes[1].full and out.kv_bytes[0].actual == out.kv_bytes[0].full
    assert out.kv_bytes_kept == sum(m.actual for m in out.kv_bytes)


def test_budgets_beyond_the_models_positions_are_clipped_and_said(model):
    geometry = geometry_of(model.config)
    profile = Allocation(model="tiny", geometry=geometry, target=600, budgets=np.full((3, 2), 600),
                         provenance={"method": "uniform"})
    out = evolalloc.generate(model, TOKENIZER, ["abc " * 10], profile, scorer="knorm", max_new_tokens=2)
    assert "positions clipped to 512" in out.notes[0]


def test_a_profile_for_another_geometry_is_refused_with_both_shapes(model):
    other = geometry_of(model.config)
    other = type(other)(**{**other.to_dict(), "num_layers": 30, "num_kv_heads": 3})
    profile = Allocation(model="smollm2", geometry=other, target=64, budgets=np.full((30, 3), 64),
                         provenance={"method": "uniform"})
    with pytest.raises(UserError, match=r"made for 30 layers × 3 KV heads, this model has 3 × 2"):
        evolalloc.generate(model, TOKENIZER, "hello", profile)


def test_a_prompt_longer_than_the_model_is_a_user_error(model):
    with pytest.raises(UserError, match="beyond the model's 512"):
        evolalloc.generate(model, TOKENIZER, "y" * 510, np.full(3, 16), max_new_tokens=8, scorer="knorm")


def test_generate_gives_the_predictions_the_local_evaluator_scores(tiny_model_dir):
    """The evaluator (engine/local.py) on passkey instances vs evolalloc.generate on their prompts."""
    import fitness
    from evolalloc.engine.local import LocalEvaluator
    from evolalloc.runtime.model import load_model

    loaded = load_model(str(tiny_model_dir))
    task = fitness.get_task("passkey")
    instances = task.instances("heldout", 3, 0, 150, loaded.tokenizer)
    scorer = get_scorer("snapkv", window=8)
    budgets = np.array([[40, 40], [12, 12], [25, 25], [60, 60]])
    with LocalEvaluator(loaded, task, instances, scorer) as evaluator:
        (result,) = evaluator.evaluate([budgets])
    for instance, outcome in zip(instances, result.instances):
        out = evolalloc.generate(loaded.model, loaded.tokenizer, [instance.prompt], budgets, scorer=scorer,
                                 max_new_tokens=instance.max_new_tokens, stop=instance.stop)
        assert out.texts[0] == outcome.prediction


@pytest.mark.parametrize("options", [dict(temperature=0.0), dict(top_p=0.0), dict(top_p=1.5), dict(top_k=-1)])
def test_bad_sampling_settings_are_a_user_error(model, options):
    with pytest.raises(UserError, match="sampling needs temperature > 0"):
        evolalloc.generate(model, TOKENIZER, "hello", np.full(3, 8), scorer="knorm", do_sample=True, **options)
