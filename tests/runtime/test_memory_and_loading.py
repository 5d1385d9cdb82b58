"""Memory accounting and model loading errors."""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.core.errors import UserError
from evolalloc.runtime.compress import compress
from evolalloc.runtime.memory import cache_memory
from evolalloc.runtime.model import load_model
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import random_prompt


def test_memory_counts_padding_budgets_and_the_full_cache(llama, llama_geometry):
    record = prefill(llama, random_prompt(100, seed=4), [get_scorer("knorm")])
    budgets = np.array([[10, 30], [20, 20], [150, 5]])  # 150 > prompt: clipped to 100
    memory = cache_memory(budgets, llama_geometry, prompt_length=100)
    per_token = 2 * 16 * 4  # key + value, head_dim 16, float32
    assert memory.budgeted == (10 + 30 + 20 + 20 + 100 + 5) * per_token
    assert memory.actual == (30 * 2 + 20 * 2 + 100 * 2) * per_token  # each layer padded to its largest head
    assert memory.full == 100 * 3 * 2 * per_token
    assert memory.actual == compress(record, budgets, get_scorer("knorm")).filled_bytes()


def test_a_missing_model_path_is_a_clear_user_error(tmp_path):
    with pytest.raises(UserError, match="no such model path"):
        load_model(str(tmp_path / "nowhere"))


def test_a_file_that_is_not_gguf_is_refused(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"\0")
    with pytest.raises(UserError, match="not a .gguf file"):
        load_model(str(tmp_path / "weights.bin"))


def test_an_unsupported_architecture_is_refused_before_its_weights_are_read(tmp_path):
    from transformers import DeepseekV3Config

    DeepseekV3Config(num_hidden_layers=1).save_pretrained(tmp_path)  # a config and no weights at all
    with pytest.raises(UserError, match="unsupported model 'deepseek_v3'.*multi-head latent attention"):
        load_model(str(tmp_path))


def test_an_unknown_dtype_is_refused(tmp_path):
    with pytest.raises(UserError, match="unsupported dtype 'int8'"):
        load_model(str(tmp_path), dtype="int8")


def test_a_local_folder_loads_in_bfloat16_and_decodes(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    from evolalloc.runtime.decode import DecodeSettings, generate
    from tests.runtime.conftest import TINY

    LlamaForCausalLM(LlamaConfig(**TINY)).save_pretrained(tmp_path)
    from evolalloc.runtime.model import load_tokenizer

    load_tokenizer().save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path), dtype="bfloat16")
    assert loaded.geometry.dtype_bytes == 2 and next(loaded.model.parameters()).dtype.is_floating_point
    scorer = get_scorer("snapkv", window=8)
    record = prefill(loaded.model, random_prompt(60, seed=6), [scorer])
    (gen,) = generate(loaded.model, [(record, np.full(3, 20))], scorer, DecodeSettings(max_new_tokens=4))
    assert len(gen.token_ids) == 4
