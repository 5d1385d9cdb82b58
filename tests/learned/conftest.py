"""Toy traces whose importance is a known function of the key, built in memory."""

from __future__ import annotations

from pathlib import Path

import torch

from evolalloc.learned.traces import FORMAT, VERSION, TraceSet


def toy_traces(count: int, *, seed: int, layers: int = 1, kv_heads: int = 2, dim: int = 8,
               length: int = 96) -> TraceSet:
    """Random keys/values; the importance of token i is ``exp(3 * k_i[0])`` in head 0 and
    ``exp(-3 * k_i[1])`` in head 1 — different per head, so each head must learn its own rule."""
    generator = torch.Generator().manual_seed(seed)
    traces = []
    for _ in range(count):
        keys = torch.randn(layers, kv_heads, length, dim, generator=generator)
        values = torch.randn(layers, kv_heads, length, dim, generator=generator)
        splits = [length // 2, length]
        importance = []
        for n in splits:
            imp = torch.empty(layers, kv_heads, n)
            imp[:, 0] = torch.exp(3 * keys[:, 0, :n, 0])
            imp[:, 1] = torch.exp(-3 * keys[:, 1, :n, 1])
            importance.append(imp)
        traces.append({"format": FORMAT, "version": VERSION, "keys": keys.half(), "values": values.half(),
                       "splits": torch.tensor(splits), "importance": importance,
                       "ids": torch.zeros(length, dtype=torch.int32)})
    geometry = {"num_layers": layers, "num_query_heads": kv_heads, "num_kv_heads": kv_heads, "head_dim": dim,
                "max_positions": 0, "dtype_bytes": 4}
    index = {"format": FORMAT, "version": VERSION, "model": {"spec": "toy", "model_type": "toy", "fingerprint": "0"},
             "geometry": geometry}
    return TraceSet(folder=Path("toy"), index=index, traces=traces)


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def one_thread():
    """The toy training is tiny: threads only add contention on a shared 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
