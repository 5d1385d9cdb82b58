"""``evolalloc model check``: architecture, geometry per layer type, the support verdict and the KV
cache per prompt, from config folders alone (no weights anywhere in them)."""

from __future__ import annotations

import pytest

from tests.clitools import run_cli

SMALL = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=6, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=4096)


def config_folder(tmp_path, name, config):
    """A model folder holding only config.json: a check that needed weights would fail on it."""
    folder = tmp_path / name
    config.save_pretrained(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["config.json"]
    return folder


@pytest.fixture
def llama(tmp_path):
    from transformers import LlamaConfig

    return config_folder(tmp_path, "llama", LlamaConfig(**SMALL))


@pytest.fixture
def qwen3(tmp_path):
    from transformers import Qwen3Config

    return config_folder(tmp_path, "qwen3", Qwen3Config(**SMALL, head_dim=32, use_sliding_window=False))


@pytest.fixture
def gemma3(tmp_path):
    from transformers import Gemma3TextConfig

    # Gemma 3's pattern: five sliding layers, then one global one.
    return config_folder(tmp_path, "gemma3", Gemma3TextConfig(**SMALL, head_dim=32, sliding_window=512))


def table_rows(out: str) -> dict[str, list[str]]:
    """The geometry table's rows by layer type: [layers, query heads, KV heads, head dim, window]."""
    rows = {}
    for line in out.splitlines():
        cells = line.split()
        if line.startswith("  ") and len(cells) == 6 and cells[1].isdigit():
            rows[cells[0]] = cells[1:]
    return rows


def test_a_llama_folder_is_supported_and_its_cache_is_every_token_of_every_layer(llama):
    result = run_cli("model", "check", llama, "--context", "1000")
    assert result.code == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == "supported" and "architecture: llama" in result.stdout
    assert table_rows(result.stdout) == {"full_attention": ["6", "4", "2", "16", "-"]}
    # 6 layers x 2 KV heads x (K + V) x 16 dims x 4 bytes x 1000 tokens
    assert f"at 1000 tokens: 1.5 MiB ({6 * 2 * 2 * 16 * 4 * 1000:,} bytes)" in result.stdout
    assert "at 4096 tokens (the model's positions)" in result.stdout


def test_a_context_beyond_the_models_positions_is_said(llama):
    result = run_cli("model", "check", llama, "--context", "5000")
    assert result.code == 0
    assert "note: --context 5000 is beyond the model's 4096 positions: a run at that length is refused" in result.stdout


def test_bfloat16_halves_the_cache(llama):
    result = run_cli("model", "check", llama, "--context", "1000", "--dtype", "bfloat16")
    assert result.code == 0 and f"({6 * 2 * 2 * 16 * 2 * 1000:,} bytes)" in result.stdout


def test_a_qwen3_folder_is_supported_with_its_qk_norms_and_own_head_size(qwen3):
    result = run_cli("model", "check", qwen3)
    assert result.code == 0, result.stderr
    assert result.stdout.strip().endswith("supported") and "architecture: qwen3" in result.stdout
    assert table_rows(result.stdout) == {"full_attention": ["6", "4", "2", "32", "-"]}
    assert "qk_norm" in result.stdout


def test_a_gemma3_folder_shows_its_sliding_and_global_layers_and_caps_the_sliding_ones(gemma3):
    result = run_cli("model", "check", gemma3, "--context", "2048")
    assert result.code == 0, result.stderr
    rows = table_rows(result.stdout)
    assert rows == {"sliding_attention": ["5", "4", "2", "32", "512"], "full_attention": ["1", "4", "2", "32", "-"]}
    assert "sliding_attention: layers 0-4" in result.stdout and "full_attention: layers 5" in result.stdout
    per_token = 2 * 2 * 32 * 4  # KV heads x (K + V) x head dim x 4 bytes
    full = per_token * 2048      # the global layer holds every token
    assert "at 2048 tokens:" in result.stdout
    shown = int(result.stdout.split("at 2048 tokens:")[1].split("(")[1].split(" bytes")[0].replace(",", ""))
    # the sliding ones near their window, not 2048
    assert full + 5 * per_token * 500 < shown < full + 5 * per_token * 2048


@pytest.mark.parametrize("kind", ["falcon_h1", "deepseek_v3"])
def test_an_architecture_the_runtime_does_not_implement_exits_2_with_the_reason(tmp_path, kind):
    import transformers

    config = {"falcon_h1": lambda: transformers.FalconH1Config(num_hidden_layers=4),
              "deepseek_v3": lambda: transformers.DeepseekV3Config(num_hidden_layers=4)}[kind]()
    folder = config_folder(tmp_path, kind, config)
    result = run_cli("model", "check", folder)
    assert result.code == 2 and "supported" not in result.stdout.splitlines()[-1:]
    assert f"architecture: {kind}" in result.stdout and "Traceback" not in result.stderr
    assert result.error_lines == [result.stderr.strip()] and f"unsupported model '{kind}'" in result.stderr
    assert result.stderr.startswith(f"error: {folder}: ")


def test_layer_types_of_different_shapes_are_each_shown_and_refused(tmp_path):
    """Gemma 4: sliding layers with 256-wide heads, global ones with 512-wide heads. The table shows
    both shapes; the runtime's one-rectangle cache refuses the model."""
    from transformers import Gemma4TextConfig

    result = run_cli("model", "check", config_folder(tmp_path, "gemma4", Gemma4TextConfig(num_hidden_layers=6)))
    assert result.code == 2 and "different KV-head counts or head sizes" in result.stderr
    rows = table_rows(result.stdout)
    assert rows["sliding_attention"][:4] == ["5", "8", "4", "256"] and rows["full_attention"][:4] == ["1", "8", "4",
                                                                                                      "512"]
    assert "KV cache per prompt" not in result.stdout  # no figure for a cache the runtime cannot hold


def test_learned_sinks_pass_the_config_check_but_the_probe_without_weights_refuses_them(tmp_path):
    """gpt-oss: sliding and full layers (which the config check accepts) whose attention also passes
    learned per-head sinks: the four-token forward on the meta device sees the argument."""
    from transformers import GptOssConfig

    from evolalloc.runtime.support import attention_support

    config = GptOssConfig(num_hidden_layers=2)
    assert attention_support(config).supported
    result = run_cli("model", "check", config_folder(tmp_path, "gpt-oss", config))
    assert result.code == 2 and "s_aux" in result.stderr and len(result.error_lines) == 1
    assert "attention probe (a 4-token forward on the meta device, no weights): refused" in result.stdout


def test_a_probe_the_meta_device_cannot_run_is_said_and_the_config_verdict_stands(llama, monkeypatch):
    import evolalloc.runtime.model_card as card

    def cannot(model):
        raise NotImplementedError("this op has no meta kernel")

    monkeypatch.setattr(card, "probe_attention", cannot)
    result = run_cli("model", "check", llama)
    assert result.code == 0 and result.stdout.strip().endswith("supported")
    assert "could not run without weights (NotImplementedError: this op has no meta kernel)" in result.stdout


def test_a_folder_without_a_config_is_one_error_line(tmp_path):
    result = run_cli("model", "check", tmp_path)
    assert result.code == 2 and "has no config.json" in result.stderr and len(result.error_lines) == 1


@pytest.mark.real_model
def test_a_gguf_file_is_checked_from_its_metadata_without_converting_it(tmp_path, monkeypatch):
    """The bundled GGUF file, as if it had never been converted (an empty cache): its config comes
    from the file's metadata and nothing is written into the cache."""
    cache = tmp_path / "empty-cache"
    monkeypatch.setenv("EVOLALLOC_CACHE", str(cache))
    result = run_cli("model", "check", "bundled:smollm2-135m-instruct", "--context", "1000")
    assert result.code == 0, result.stderr
    assert "architecture: llama" in result.stdout and result.stdout.strip().endswith("supported")
    assert table_rows(result.stdout) == {"full_attention": ["30", "9", "3", "64", "-"]}
    assert f"({30 * 3 * 2 * 64 * 4 * 1000:,} bytes)" in result.stdout
    assert "license:" not in result.stdout  # SmolLM2's package names no terms file
    assert not cache.exists()


def test_the_gemma_example_in_the_docs_is_what_the_command_prints(tmp_path):
    """docs/your-model.md shows `model check` on a config with Gemma-3-1B's layout: run it here."""
    import re
    from pathlib import Path

    from transformers import Gemma3TextConfig

    doc = (Path(__file__).resolve().parents[2] / "docs" / "your-model.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```$", doc, flags=re.S | re.M)  # each fence opens, then closes
    block = next(b for b in blocks if "model check /models/gemma-3-1b-layout" in b)
    command, *shown = block.strip().splitlines()
    config = Gemma3TextConfig(vocab_size=262144, hidden_size=1152, intermediate_size=6912, num_hidden_layers=26,
                              num_attention_heads=4, num_key_value_heads=1, head_dim=256, sliding_window=512,
                              max_position_embeddings=32768, query_pre_attn_scalar=256,
                              architectures=["Gemma3ForCausalLM"])
    folder = config_folder(tmp_path, "gemma-3-1b-layout", config)
    args = command.split()[2:]  # after "$ evolalloc"
    result = run_cli(*[str(folder) if a.endswith("gemma-3-1b-layout") else a for a in args])
    assert result.code == 0, result.stderr
    assert result.stdout.strip().splitlines()[1:] == shown[1:]  # all but the folder's path


def test_a_model_type_transformers_does_not_know_is_one_error_line_naming_the_folder(tmp_path):
    folder = tmp_path / "mystery"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "not_a_real_architecture", "num_hidden_layers": 2}')
    result = run_cli("model", "check", folder)
    assert result.code == 2 and len(result.error_lines) == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: model: cannot read {folder / 'config.json'}: ")
