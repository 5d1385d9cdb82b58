"""Which models the runtime accepts is decided by behaviour: the config's attention features and
a probe forward through evolalloc's attention function; anything else is refused in one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers as T

import evolalloc
from evolalloc.core.errors import UserError
from evolalloc.runtime.model import prepare_model
from evolalloc.runtime.support import attention_support
from tests.runtime.conftest import architectures, tiny_config


@pytest.mark.parametrize("architecture", list(architectures()))
def test_every_architecture_of_the_exactness_tests_is_supported(architecture):
    assert attention_support(tiny_config(architecture)).supported


def test_the_verdict_names_the_attention_features_it_found():
    assert set(attention_support(tiny_config("gemma2")).features) >= {"sliding_window", "softcap",
                                                                      "query_pre_attn_scalar"}
    assert "qk_norm" in attention_support(tiny_config("qwen3")).features
    assert "rope_llama3" in attention_support(tiny_config("llama3-rope")).features


@pytest.mark.parametrize("config, missing", [
    (lambda: T.DeepseekV3Config(), "multi-head latent attention"),
    (lambda: T.Qwen3NextConfig(), "linear-attention"),
    (lambda: T.FalconH1Config(), "state-space"),
    (lambda: T.Llama4TextConfig(), "chunked local attention"),
    (lambda: T.Gemma3nTextConfig(), "reuse another layer's KV cache"),
    (lambda: T.Gemma4TextConfig(), "4 KV heads x 256, 4 KV heads x 512"),
], ids=["mla", "linear-attention", "mamba-hybrid", "chunked", "kv-sharing", "per-layer-head-sizes"])
def test_attention_the_runtime_does_not_implement_is_refused_naming_what_is_missing(config, missing):
    verdict = attention_support(config())
    assert not verdict.supported and missing in verdict.reason and "\n" not in verdict.reason


def tiny_gpt_oss():
    config = T.GptOssConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=32, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=8, vocab_size=128, num_local_experts=2,
                            num_experts_per_tok=1, pad_token_id=0, eos_token_id=2, bos_token_id=1)
    torch.manual_seed(0)
    return T.GptOssForCausalLM(config).eval()


def test_learned_per_head_sinks_pass_the_config_check_but_the_probe_refuses_them():
    model = tiny_gpt_oss()
    assert attention_support(model.config).supported  # nothing in the config says "sinks"
    with pytest.raises(UserError, match="s_aux"):
        prepare_model(model, "gpt-oss")


def test_the_library_call_refuses_a_model_it_would_run_wrong():
    class Tokenizer:
        eos_token_id = 2

        def encode(self, text, add_special_tokens=True):
            return [3 + (ord(c) % 100) for c in text]

        def decode(self, ids, skip_special_tokens=True):
            return ""

    with pytest.raises(UserError, match="s_aux"):
        evolalloc.generate(tiny_gpt_oss(), Tokenizer(), ["some prompt"], np.full(2, 40), max_new_tokens=2)
