"""Shared fixtures: the bundled models (each loaded once per session) and a tiny model folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


@pytest.fixture(scope="session")
def bundled():
    from evolalloc.runtime.model import load_model

    torch.manual_seed(0)
    return load_model("bundled:smollm2-135m-instruct")


@pytest.fixture(scope="session")
def gemma():
    """Gemma 3 270M (``bundled:gemma3-270m``: real weights, 15 sliding layers of window 512 and 3
    global ones) in float32, through evolalloc's attention."""
    from evolalloc.runtime.model import load_model

    torch.manual_seed(0)
    return load_model("bundled:gemma3-270m")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 4-layer random Llama saved as a local HF folder, with the bundled model's real tokenizer
    (so tasks tokenize as they do on the real model; the answers are noise)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from evolalloc.runtime.model import load_tokenizer

    tokenizer = load_tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id)
    folder = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
