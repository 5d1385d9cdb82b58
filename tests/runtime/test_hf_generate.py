"""transformers' own model.generate() runs on an evicted cache (GenerateCache reports the logical
length; positions come from the attention mask) and gives evolalloc.generate's greedy tokens."""

from __future__ import annotations

import numpy as np
import pytest

import evolalloc
from evolalloc.runtime.hf_generate import generate_inputs
from tests.runtime.conftest import tiny_model
from tests.runtime.test_generation_api import PROMPTS, TOKENIZER


def hf_tokens(model, prompts, budgets, scorer, steps):
    inputs = generate_inputs(model, TOKENIZER, prompts, budgets, scorer=scorer, max_new_tokens=steps)
    with inputs.active():
        out = model.generate(**inputs.kwargs, max_new_tokens=steps - 1, do_sample=False, eos_token_id=2)
    answers = []
    for tokens in inputs.answers(out):
        answers.append(tokens[: tokens.index(2) + 1] if 2 in tokens else tokens)
    return answers


@pytest.mark.parametrize("architecture", ["llama", "mistral", "qwen2"])
@pytest.mark.parametrize("scorer, budgets",
                         [("knorm", np.array([[20, 12], [9, 30], [16, 16]])), ("window", np.array([14, 40, 9]))])
def test_model_generate_on_the_evicted_cache_gives_the_runtimes_tokens(architecture, scorer, budgets):
    model = tiny_model(architecture)
    ours = evolalloc.generate(model, TOKENIZER, PROMPTS, budgets, scorer=scorer, max_new_tokens=9)
    assert hf_tokens(model, PROMPTS, budgets, scorer, steps=9) == ours.token_ids


def test_without_the_logical_length_generate_would_re_prefill(monkeypatch):
    from evolalloc.runtime.hf_generate import GenerateCache

    model = tiny_model("llama")
    budgets = np.full(3, 10)
    monkeypatch.setattr(GenerateCache, "get_seq_length", lambda self, layer_idx=0: self.evicted.used[0])
    with pytest.raises(RuntimeError, match="evicted cache layer 0 is full"):
        hf_tokens(model, PROMPTS, budgets, "knorm", steps=4)  # the whole prompt is fed again: the cache overflows
