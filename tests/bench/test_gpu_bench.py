"""``bench gpu``: real shapes from config files, random weights, every figure printed; on a CPU, tiny."""

from __future__ import annotations

import json

import pytest

from evolalloc.bench.gpu_shape import hf_config, load_shape, shape_names
from evolalloc.core.errors import UserError
from tests.clitools import run_cli


def test_the_shipped_8b_shapes_have_the_public_geometry():
    llama = hf_config(load_shape("llama-3.1-8b"))
    assert (llama.num_hidden_layers, llama.num_attention_heads, llama.num_key_value_heads, llama.head_dim) == (32, 32,
                                                                                                               8, 128)
    assert (llama.hidden_size, llama.intermediate_size, llama.vocab_size) == (4096, 14336, 128256)
    assert llama.rope_parameters["rope_type"] == "llama3" and llama.rope_parameters["factor"] == 8.0
    assert llama.rope_parameters["rope_theta"] == 500000.0 and llama.max_position_embeddings == 131072
    qwen = hf_config(load_shape("qwen3-8b"))
    assert qwen.model_type == "qwen3"
    assert (qwen.num_hidden_layers, qwen.num_key_value_heads, qwen.head_dim, qwen.intermediate_size,
            qwen.vocab_size) == (36, 8, 128, 12288, 151936)
    assert qwen.rope_parameters["rope_theta"] == 1000000.0 and qwen.max_position_embeddings == 40960
    assert {"llama-3.1-8b", "qwen3-8b", "tiny-llama"} <= set(shape_names())


def test_layers_keeps_the_first_k_and_says_so():
    shape = load_shape("llama-3.1-8b", layers=2)
    assert shape.layers == 2 and shape.full_layers == 32 and shape.truncated
    assert "TRUNCATED" in shape.banner() and "NOT for the whole model" in shape.banner()
    assert load_shape("llama-3.1-8b").banner() is None
    with pytest.raises(UserError, match="--layers must be between 1 and the shape's 32 layers"):
        load_shape("llama-3.1-8b", layers=33)


def test_an_unknown_shape_is_one_line_naming_the_shipped_ones():
    result = run_cli("bench", "gpu", "--shape", "llama-9b", "--device", "cpu")
    assert result.code == 2
    assert result.error_lines == ["error: --shape: unknown shape 'llama-9b': give one "
                                  f"of {', '.join(shape_names())} or a config.json path"]


def test_a_context_beyond_the_shapes_positions_is_refused_before_any_prefill():
    result = run_cli("bench", "gpu", "--shape", "tiny-llama", "--device", "cpu", "--dtype", "float32", "--context",
                     "8190")
    assert result.code == 2
    assert "8190 + 16 tokens do not fit the shape's 8192 positions" in result.error_lines[-1]


def test_bench_gpu_on_a_tiny_shape_prints_every_figure_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    result = run_cli("bench", "gpu", "--shape", "tiny-llama", "--layers", "2", "--device", "cpu", "--dtype", "float32",
                     "--context", "300", "--budget", "40", "--prompts", "2", "--candidates", "2", "--new-tokens", "4",
                     "--threads", "1", "--json", out)
    assert result.code == 0, result.stderr
    text = result.stdout
    for label in ("(a) cached records", "(b) re-prefill each time", "(c) bare decode floor",
                  "b/a (re-prefill / cached)",
                  "a/c (cached / floor)", "prefill ", "records per prompt", "ESTIMATE for a search over 100 instances"):
        assert label in text, label
    assert text.startswith("!! TRUNCATED: 2 of tiny-llama's 4 layers")
    figures = json.loads(out.read_text())
    assert figures["layers"] == 2 and figures["full_layers"] == 4 and figures["truncated"]
    assert figures["b_max"] == 160 and figures["device_peak_prefill"] is None
    # Bounded records keep at most b_max of 300 slots per head: smaller than the whole ones.
    assert 0 < figures["record_bytes_bounded"] < figures["record_bytes_whole"]
    assert figures["reprefill_over_cached"] == pytest.approx(
        figures["reprefill_per_candidate"] / figures["cached_per_candidate"]
    )


def test_a_qwen3_config_file_is_a_shape(tmp_path):
    config = {"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
              "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512, "max_position_embeddings": 1024,
              "rope_theta": 1e6,
              "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = run_cli("bench", "gpu", "--shape", tmp_path, "--device", "cpu", "--dtype", "float32", "--context", "200",
                     "--budget", "40", "--prompts", "1", "--candidates", "1", "--new-tokens", "3", "--threads", "1")
    assert result.code == 0, result.stderr
    assert f"shape: {tmp_path / 'config.json'} (2 layers x 2 KV heads, head size 16)" in result.stdout


def test_a_budget_below_what_snapkv_always_keeps_is_refused_before_any_weight():
    result = run_cli("bench", "gpu", "--shape", "llama-3.1-8b", "--device", "cpu", "--budget", "16")
    assert result.code == 2
    assert result.error_lines[-1] == "error: --budget: c = 16 is below the 32 tokens snapkv always keeps"


def test_a_shape_too_large_for_the_device_is_refused_before_any_weight(monkeypatch):
    import evolalloc.bench.gpu_shape as gpu_shape

    monkeypatch.setattr(gpu_shape, "free_bytes", lambda device: 4 * 2**30)
    result = run_cli("bench", "gpu", "--shape", "llama-3.1-8b", "--device", "cpu", "--dtype", "bfloat16")
    assert result.code == 2
    assert result.error_lines[-1] == ("error: --shape: llama-3.1-8b's 32 layers "
                                      "need 15.0 GiB of weights in bfloat16; cpu has "
                                      "4.0 GiB free: build fewer layers (--layers K) or use a device with more memory")


def test_a_shape_whose_attention_the_runtime_does_not_implement_is_refused_before_any_weight(tmp_path):
    shape = dict(load_shape("tiny-llama").config)
    (tmp_path / "config.json").write_text(json.dumps({**shape, "use_bidirectional_attention": True}))
    result = run_cli("bench", "gpu", "--shape", tmp_path, "--device", "cpu", "--dtype", "float32", "--context", "200",
                     "--budget", "40")
    assert result.code == 2
    assert result.error_lines[-1] == (f"error: model: unsupported model 'llama' in {tmp_path / 'config.json'}: "
                                      "bidirectional attention is not implemented: the runtime decodes causally")
    assert "prefill" not in result.stderr  # refused before any weight


def test_the_random_weights_follow_the_seed_and_take_the_planned_bytes():
    import torch

    from evolalloc.bench.gpu_shape import planned_weight_bytes, random_model, weight_bytes

    shape = load_shape("tiny-llama")
    first, again = (random_model(shape, device="cpu", dtype="float32", seed=3) for _ in range(2))
    other = random_model(shape, device="cpu", dtype="float32", seed=4)

    def weights(loaded):
        return next(loaded.model.parameters())

    assert torch.equal(weights(first), weights(again)) and not torch.equal(weights(first), weights(other))
    assert weight_bytes(first.model) == planned_weight_bytes(shape, "float32") == 2 * planned_weight_bytes(shape,
                                                                                                           "bfloat16")
    assert first.model.config._attn_implementation == "evolalloc" and first.tokenizer is None
