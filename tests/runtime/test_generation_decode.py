"""``evolalloc.generate`` with decode-time eviction: the runtime's tokens, the allocation file's own setting
by default, and one-line refusals for what cannot hold budgets while decoding."""

from __future__ import annotations

import numpy as np
import pytest

import evolalloc
from evolalloc.core.allocation import Allocation
from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.core.errors import UserError
from evolalloc.runtime.decode import DecodeSettings
from evolalloc.runtime.decode import generate as runtime_generate
from evolalloc.runtime.model import geometry_of
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import tiny_model
from tests.runtime.test_generation_api import PROMPTS, TOKENIZER


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama")


def test_generate_holds_the_budgets_as_the_runtime_does(model):
    scorer = get_scorer("snapkv", window=4)
    budgets = np.array([[20, 12], [9, 30], [16, 16]])
    out = evolalloc.generate(model, TOKENIZER, PROMPTS, budgets, scorer=scorer, max_new_tokens=30, decode=5)
    assert out.decode == DecodeEviction(5)
    settings = DecodeSettings(max_new_tokens=30, eos_ids=(2,))
    for prompt, tokens in zip(PROMPTS, out.token_ids):
        record = prefill(model, TOKENIZER.encode(prompt), [scorer])
        (held,) = runtime_generate(model, [(record, budgets)], scorer, settings, TOKENIZER, decode=DecodeEviction(5))
        (prompt_only,) = runtime_generate(model, [(record, budgets)], scorer, settings, TOKENIZER)
        assert tokens == held.token_ids
    assert evolalloc.generate(model, TOKENIZER, PROMPTS[-1], budgets, scorer=scorer,
                              max_new_tokens=30).token_ids[0] == prompt_only.token_ids


def test_an_allocation_that_was_searched_held_is_generated_held_unless_told_otherwise(model):
    profile = Allocation(model="tiny", geometry=geometry_of(model.config), target=10, scorer="h2o",
                         scorer_params={"window": 4}, budgets=np.full((3, 2), 10), provenance={"method": "uniform"},
                         decode=DecodeEviction(3))
    held = evolalloc.generate(model, TOKENIZER, PROMPTS, profile, max_new_tokens=20)
    assert held.decode == DecodeEviction(3)
    assert evolalloc.generate(model, TOKENIZER, PROMPTS, profile, max_new_tokens=20, decode=3).token_ids == \
        held.token_ids
    other = evolalloc.generate(model, TOKENIZER, PROMPTS, profile, max_new_tokens=20, decode=1)
    assert other.decode == DecodeEviction(1) and other.token_ids != held.token_ids


@pytest.mark.parametrize("scorer, decode, words", [
    ("random", 4, "scorer 'random' cannot rank generated tokens"),
    ("tova", 0, "decode interval must be >= 1, got 0"),
    ("tova", {"every": 2}, "a decode setting is {interval: N}"),
])
def test_what_cannot_hold_budgets_while_decoding_is_a_one_line_user_error(model, scorer, decode, words):
    with pytest.raises(UserError, match=words) as err:
        evolalloc.generate(model, TOKENIZER, "hello", np.full(3, 8), scorer=scorer, decode=decode)
    assert str(err.value).startswith("decode: ") and "\n" not in str(err.value)
