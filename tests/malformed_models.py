"""Model files that cannot be read, one of each kind, for the tests that every entry point refuses
them in one line naming the file (``evolalloc/runtime/model_files.py``).

``MALFORMED[kind](folder)`` writes one under ``folder`` and returns ``(spec, file)``: the model spec
to give (a HF folder or a ``.gguf`` file) and the file the error must name. No weights anywhere:
the GGUF files are a few kilobytes written with the ``gguf`` package.
"""

from __future__ import annotations

import json
from pathlib import Path

SMALL = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=256)


def wrong_type(folder: Path) -> tuple[Path, Path]:
    """A Llama config.json whose layer count is a word: valid JSON, a field of the wrong type."""
    from transformers import LlamaConfig

    model = folder / "wrong-type"
    LlamaConfig(**SMALL).save_pretrained(model)
    config = json.loads((model / "config.json").read_text())
    config["num_hidden_layers"] = "eighteen"
    (model / "config.json").write_text(json.dumps(config))
    return model, model / "config.json"


def not_json(folder: Path) -> tuple[Path, Path]:
    model = folder / "not-json"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama", "num_hidden_layers": 2,')  # cut off
    return model, model / "config.json"


def tiny_gguf(path: Path) -> Path:
    """A complete GGUF file of a 2-layer Llama's metadata and one small tensor (transformers reads its config)."""
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_context_length(256)
    writer.add_embedding_length(64)
    writer.add_feed_forward_length(128)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tensor("token_embd.weight", np.zeros((128, 64), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def truncated_gguf(folder: Path) -> tuple[Path, Path]:
    """A GGUF file cut short right after its header, metadata and tensor list: no tensor data."""
    import gguf

    whole = tiny_gguf(folder / "whole.gguf")
    data_offset = gguf.GGUFReader(str(whole)).data_offset
    path = folder / "truncated.gguf"
    path.write_bytes(whole.read_bytes()[:data_offset])
    whole.unlink()
    return path, path


def garbage_gguf(folder: Path) -> tuple[Path, Path]:
    """A file named .gguf holding random bytes."""
    import numpy as np

    path = folder / "garbage.gguf"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    return path, path


def corrupt_gguf(folder: Path) -> tuple[Path, Path]:
    """The GGUF magic and version 3, then random bytes where the counts and metadata belong."""
    import struct

    import numpy as np

    path = folder / "corrupt.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<I", 3) + np.random.default_rng(1).bytes(4096))
    return path, path


MALFORMED = {"wrong-type": wrong_type, "not-json": not_json, "truncated-gguf": truncated_gguf,
             "garbage-gguf": garbage_gguf, "corrupt-gguf": corrupt_gguf}
