"""Tiny randomly initialised models (built from configs, no downloads) for fast runtime tests.

``EVOLALLOC_TEST_DEVICE`` (default ``cpu``) and ``EVOLALLOC_TEST_DTYPE`` (default ``float32``) put
the tiny models and the random prompts on another device or in another precision, so the
exactness tests run unchanged on a GPU in bfloat16 (``benchmarks/gpu_check.sh``); ``LOGITS_CLOSE``
is the logit tolerance for that precision (the tokens must still be identical). A test that asks
``tiny_model`` for a dtype gets that one, on the same device.
"""

from __future__ import annotations

import os

import pytest
import torch

from evolalloc.runtime.attention import use_evolalloc_attention
from evolalloc.runtime.model import geometry_of

TINY = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    rope_theta=10000.0,
    tie_word_embeddings=False,
    bos_token_id=1,
    eos_token_id=2,
)


DEVICE = torch.device(os.environ.get("EVOLALLOC_TEST_DEVICE", "cpu"))
DTYPE = getattr(torch, os.environ.get("EVOLALLOC_TEST_DTYPE", "float32"))
# float32: the paths differ only in summation order. 16-bit: each logit is rounded to ~3 digits on
# the way out, so two equal computations in a different kernel order differ by a few of its ulps.
LOGITS_CLOSE = dict(rtol=1e-4, atol=1e-4) if DTYPE == torch.float32 else dict(rtol=2e-2, atol=2e-2)

# A sliding window shorter than the test prompts, so that the window decides what a layer sees.
WINDOW = 24
GEMMA = {"head_dim": 16, "query_pre_attn_scalar": 24, "pad_token_id": 0, "sliding_window": WINDOW}
SOFTCAP = 5.0  # an attention logit soft-cap that binds on the tiny weights of "gemma2-softcap"


def architectures() -> dict:
    """Name -> (config class, model class, config overrides): every architecture the runtime
    supports, with the features that change attention (rope scaling, q/k norms, fused qkv,
    sliding windows, soft-capping, query scaling) switched on."""
    import transformers as T

    return {
        "llama": (T.LlamaConfig, T.LlamaForCausalLM, {}),
        "llama3-rope": (T.LlamaConfig, T.LlamaForCausalLM, {"rope_scaling": {
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64}}),
        "mistral": (T.MistralConfig, T.MistralForCausalLM, {"sliding_window": None}),
        "mistral-sliding": (T.MistralConfig, T.MistralForCausalLM, {"sliding_window": WINDOW}),
        "qwen2": (T.Qwen2Config, T.Qwen2ForCausalLM, {"use_sliding_window": False}),
        "qwen3": (T.Qwen3Config, T.Qwen3ForCausalLM, {"head_dim": 16, "use_sliding_window": False}),
        "phi3": (T.Phi3Config, T.Phi3ForCausalLM, {"sliding_window": None, "pad_token_id": 0}),
        "phi3-sliding": (T.Phi3Config, T.Phi3ForCausalLM, {"sliding_window": WINDOW, "pad_token_id": 0}),
        "gemma2": (T.Gemma2Config, T.Gemma2ForCausalLM, {**GEMMA, "attn_logit_softcapping": 50.0,
                                                         "final_logit_softcapping": 30.0}),
        # Gemma 2's cap of 50 never binds on weights drawn at std 0.02 (attention logits ~0.02: the cap
        # moves the answer by 1e-7, so a runtime that ignored it would pass): weights ten times larger
        # and a cap of 5 make it bind (it moves the logits by ~9 and changes the greedy tokens).
        "gemma2-softcap": (T.Gemma2Config, T.Gemma2ForCausalLM, {**GEMMA, "attn_logit_softcapping": SOFTCAP,
                                                                 "initializer_range": 0.2}),
        "gemma3": (T.Gemma3TextConfig, T.Gemma3ForCausalLM, {**GEMMA, "layer_types": [
            "sliding_attention", "full_attention", "sliding_attention"]}),
    }


def tiny_config(architecture: str = "llama", **overrides):
    """The config of ``tiny_model(architecture)``."""
    config_cls, _, extra = architectures()[architecture]
    return config_cls(**{**TINY, **extra, **overrides})


def tiny_model(architecture: str = "llama", attn: str = "evolalloc", seed: int = 0, dtype=None, **overrides):
    """A 3-layer GQA model (4 query heads, 2 KV heads) with random weights, in eval mode, on
    ``DEVICE`` in ``dtype`` (default ``DTYPE``)."""
    _, model_cls, _ = architectures()[architecture]
    torch.manual_seed(seed)
    config = tiny_config(architecture, **overrides)
    model = model_cls(config).to(device=DEVICE, dtype=dtype or DTYPE).eval()
    if attn == "evolalloc":
        use_evolalloc_attention(model)
    else:
        model.set_attn_implementation(attn)
    return model


@pytest.fixture(scope="session")
def llama():
    return tiny_model("llama")


@pytest.fixture(scope="session")
def llama_geometry(llama):
    return geometry_of(llama.config)


def random_prompt(length: int, seed: int = 0, vocab: int = 128) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (length,), generator=generator).to(DEVICE)


def every_scorer(checkpoint_dir) -> list:
    """Every registered scorer, built for the tiny model: the heuristics from their defaults, and
    ``learned``, ``retention-gates`` and ``ppo-policy`` from randomly initialised checkpoints (the invariants hold
    for any policy)."""
    from evolalloc.runtime.policy import HeadPolicies, PolicyConfig, model_identity, save_policy
    from evolalloc.runtime.scorers import get_scorer, list_scorers

    model = tiny_model("llama")
    torch.manual_seed(1)
    policy = HeadPolicies(PolicyConfig(num_layers=3, num_kv_heads=2, head_dim=16, hidden=8))
    path = save_policy(f"{checkpoint_dir}/tiny-policy.pt", policy, model=model_identity("tiny", model),
                       geometry=geometry_of(model.config).to_dict(), training={})
    from evolalloc.runtime.gates import GatesConfig, RetentionGates, save_gates

    gates = save_gates(f"{checkpoint_dir}/tiny-gates.pt",
                       RetentionGates(GatesConfig(num_layers=3, num_kv_heads=2, head_dim=16, hidden=8)),
                       model=model_identity("tiny", model), geometry=geometry_of(model.config).to_dict(), training={})
    from evolalloc.runtime.ppo_network import fresh_network, save_ppo_policy

    network = fresh_network(geometry_of(model.config).to_dict(), hidden=8, depth=1, seed=2)
    with torch.no_grad():  # a random ranking's invariants: scores that differ, not the near-uniform start
        network.mlp[-1].weight.normal_()
    ppo = save_ppo_policy(f"{checkpoint_dir}/tiny-ppo.pt", network, model=model_identity("tiny", model),
                          geometry=geometry_of(model.config).to_dict(), training={})
    checkpoints = {"learned": str(path), "retention-gates": str(gates), "ppo-policy": str(ppo)}
    return [get_scorer(name, checkpoint=checkpoints[name]) if name in checkpoints else get_scorer(name)
            for name in list_scorers()]


@pytest.fixture(scope="session")
def scorers(tmp_path_factory):
    return every_scorer(tmp_path_factory.mktemp("policy"))
