"""EvolKV's space: one unit per layer; a layer's budget applies to all of its KV heads."""

from __future__ import annotations

import numpy as np

from searchspaces.base import SearchSpace
from searchspaces.registry import register_search_space


@register_search_space("layer_groups")
class LayerGroups(SearchSpace):
    """Units are layers ``0 .. num_layers-1``; groups are ``n_g`` consecutive layers."""

    granularity = "layer"
    takes_layer_caps = True

    @property
    def n_units(self) -> int:
        return self.num_layers

    def _to_grid(self, values: np.ndarray) -> np.ndarray:
        # [L] -> [L, H]: every KV head of a layer shares the layer's budget.
        return np.repeat(values[:, None], self.num_kv_heads, axis=1)

    def _from_grid(self, grid: np.ndarray) -> np.ndarray:
        # Mean over heads, so a head-level profile seeds a layer search with the same layer totals.
        return grid.mean(axis=1)
