"""Soft eviction (``runtime.soft_keep``): ``r = 1`` is the model's own attention, ``r -> 0`` on a
token is the token dropped, and the bias carries a gradient."""

from __future__ import annotations

import torch

from evolalloc.runtime.soft_keep import fed_logits
from tests.runtime.conftest import random_prompt, tiny_model


def prompt_kv(model, ids):
    """The prompt's cached keys and values ``[layers, Hkv, n, D]`` from the model's own prefill."""
    with torch.no_grad():
        cache = model(input_ids=ids[None], use_cache=True).past_key_values
    keys = torch.stack([layer.keys[0] for layer in cache.layers])
    values = torch.stack([layer.values[0] for layer in cache.layers])
    return keys, values


def test_keeping_every_token_gives_the_models_own_logits_exactly():
    model = tiny_model("llama")
    ids = random_prompt(60, seed=3)
    keys, values = prompt_kv(model, ids[:50])
    with torch.no_grad():
        own = fed_logits(model, keys, values, ids[50:], None)
        kept = fed_logits(model, keys, values, ids[50:], torch.zeros(keys.shape[:3]))  # log r = 0: r = 1
        whole = model(input_ids=ids[None]).logits[0, 50:]
    assert torch.equal(kept, own)
    assert torch.allclose(kept, whole, atol=1e-5)  # the full forward's, up to another kernel's rounding


def test_a_token_kept_with_probability_zero_is_the_token_dropped():
    model = tiny_model("llama")
    ids = random_prompt(60, seed=4)
    keys, values = prompt_kv(model, ids[:50])
    dropped = [7, 20, 33]
    log_keep = torch.zeros(keys.shape[:3])
    log_keep[:, :, dropped] = float("-inf")
    nearly = torch.zeros(keys.shape[:3])
    nearly[:, :, dropped] = torch.log(torch.sigmoid(torch.tensor(-60.0)))  # r = sigmoid(-60) ~ 1e-26
    kept = torch.ones(50, dtype=torch.bool)
    kept[dropped] = False
    with torch.no_grad():
        soft = fed_logits(model, keys, values, ids[50:], log_keep)
        almost = fed_logits(model, keys, values, ids[50:], nearly)
        # The same tokens removed from the cache; positions continue from the original 50.
        hard = fed_logits(model, keys[:, :, kept], values[:, :, kept], ids[50:], None, start=50)
        other = fed_logits(model, keys, values, ids[50:], None)
    assert torch.allclose(soft, hard, atol=1e-5) and torch.allclose(almost, hard, atol=1e-5)
    assert not torch.allclose(other, hard, atol=1e-3)  # dropping them does change the logits


def test_the_keep_bias_carries_a_gradient_to_every_layer():
    model = tiny_model("llama")
    ids = random_prompt(60, seed=5)
    keys, values = prompt_kv(model, ids[:50])
    log_keep = torch.zeros(keys.shape[:3], requires_grad=True)
    logits = fed_logits(model, keys, values, ids[50:], log_keep)
    torch.nn.functional.cross_entropy(logits[:-1], ids[51:]).backward()
    assert (log_keep.grad.abs().sum(dim=(1, 2)) > 0).all()
