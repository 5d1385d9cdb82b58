"""Export a budget profile in another tool's own terms (``evolalloc export --format NAME``).

Each format is one small module registered in ``exporters`` (a ``evolalloc.registry.Registry``); the
registry lists every name without importing any module, so ``--help`` and the ``--format``
choices stay instant. An exporter is a class built with the user's options
(``exporters.create(name, **options)``, unknown options refused by name) whose ``render()``
returns the files to write. Formats:

- ``json``    — the allocation file itself, as evolalloc's runtime loads it;
- ``kvpress`` — per-layer compression ratios for kvpress's ``PerLayerCompressionPress``;
- ``trtllm``  — TensorRT-LLM ``KvCacheConfig`` (``max_attention_window`` per layer);
- ``curve``   — a family of profiles over budgets, ``[n_budgets, layers, kv_heads]`` (.npy + JSON);
- ``headkv``  — per-(layer, KV head) capacities as JSON;
- ``lukv``    — kvpress ``LUKVPress`` budget curves, ``[99, layers, kv_heads]`` prune ratios (.npy + JSON).

Each module's docstring has a loading snippet for its target tool.
"""

from __future__ import annotations

from evolalloc.export.base import (
    Exporter,
    Rendered,
    export_allocation,
    export_text,
    exporter_for,
    exporters,
    register_exporter,
)

__all__ = ["Exporter", "Rendered", "exporters", "exporter_for", "export_allocation", "export_text",
           "register_exporter"]
