"""Memory accounting: what a compressed cache really occupies, next to what its budgets imply."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evolalloc.core.geometry import ModelGeometry


@dataclass(frozen=True)
class CacheMemory:
    """Bytes of one sequence's KV cache after prefill and eviction (before decoding).

    ``actual``: what the evicted cache holds, padding included (each layer is padded to its
    largest head budget). ``budgeted``: the sum of the budgets (what an ideal per-head layout
    needs). ``full``: the uncompressed cache of the same prompt.
    """

    actual: int
    budgeted: int
    full: int

    @property
    def ratio(self) -> float:
        """Actual over full: the fraction of the full cache kept."""
        return self.actual / self.full if self.full else 0.0


def reachable_budgets(budgets: np.ndarray, geometry: ModelGeometry, prompt_length: int) -> np.ndarray:
    """``[L, Hkv]`` the tokens each (layer, head) really keeps: the budget, clipped to the prompt and,
    for a sliding layer of window ``W``, to the ``W - 1`` tokens it can still attend to."""
    reach = np.array([prompt_length if cap is None else min(cap, prompt_length) for cap in geometry.caps()],
                     dtype=np.int64)
    return np.minimum(np.asarray(budgets, dtype=np.int64), reach[:, None])


def cache_memory(budgets: np.ndarray, geometry: ModelGeometry, prompt_length: int) -> CacheMemory:
    """Memory of one sequence of ``prompt_length`` tokens under ``budgets`` ``[L, Hkv]``.

    ``full`` is what the stock model's cache holds: every token in a full-attention layer, at
    most ``W - 1`` in a sliding layer (transformers' sliding cache keeps no more).
    """
    kept = reachable_budgets(budgets, geometry, prompt_length)
    full_reach = reachable_budgets(np.full((geometry.num_layers, geometry.num_kv_heads), prompt_length), geometry,
                                   prompt_length)
    per_token = geometry.bytes_per_token_per_head
    padded = kept.max(axis=1) * geometry.num_kv_heads
    return CacheMemory(
        actual=int(padded.sum()) * per_token,
        budgeted=int(kept.sum()) * per_token,
        full=int(full_reach.sum()) * per_token,
    )
