"""Head-level space: one unit per (layer, KV head) pair, layer-major order."""

from __future__ import annotations

import numpy as np

from searchspaces.base import SearchSpace
from searchspaces.registry import register_search_space


@register_search_space("head_groups")
class HeadGroups(SearchSpace):
    """Unit ``u`` is ``(layer, kv_head) = divmod(u, num_kv_heads)``.

    Groups are ``n_g`` consecutive units, so a group may span a layer boundary (with 3 KV heads
    and n_g = 8, group 0 is layers 0-1 and two heads of layer 2). That keeps the EvolKV rule
    "contiguous groups, bottom-up" unchanged at head granularity.
    """

    granularity = "head"
    takes_layer_caps = True

    @property
    def n_units(self) -> int:
        return self.num_layers * self.num_kv_heads

    def unit_of(self, index: int) -> tuple[int, int]:
        """``(layer, kv_head)`` of unit ``index``."""
        if not 0 <= index < self.n_units:
            raise IndexError(f"unit {index} out of range [0, {self.n_units})")
        return divmod(int(index), self.num_kv_heads)

    def _to_grid(self, values: np.ndarray) -> np.ndarray:
        return values.reshape(self.num_layers, self.num_kv_heads)

    def _from_grid(self, grid: np.ndarray) -> np.ndarray:
        return grid.reshape(-1)
