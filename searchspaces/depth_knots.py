"""A low-dimensional space: a few budget knots over depth, linearly interpolated to every layer.

EvolKV's ``layer_groups`` gives every layer a free budget and searches groups of 8 one after the
other. On the quickstart that profile zig-zags from one layer to the next (42 to 253 tokens),
which looks like noise fitted to the search instances more than a shape of the model. Here the
searched vector is ``n_knots`` ratios placed evenly over depth (knot ``j`` at layer
``j * (L - 1) / (n_knots - 1)``); a layer's ratio is the piecewise-linear interpolation between
its two neighbouring knots. So neighbouring layers get similar budgets, the optimizer searches 6
numbers instead of 30, and all of them are searched at once (6 <= group_size: one group, i.e.
full-vector CMA-ES) — with the same number of evaluations, each dimension gets far more of them.

Decoding works on the *layers*, not on the knots: interpolate, round ``ratio * c``, clip to
``[min_budget, max_budget]``, and under the exact budget rule complete the layers to ``c * L``
(the same ``complete_budgets`` as every space), so a candidate costs exactly what the shipped
profile will.
"""

from __future__ import annotations

import numpy as np

from searchspaces.base import SearchSpace
from searchspaces.completion import complete_budgets
from searchspaces.registry import register_search_space

#: Knots over depth: 6 over 30 layers is one knot every ~6 layers (fewer than EvolKV's groups of 8).
N_KNOTS = 6


@register_search_space("depth_knots")
class DepthKnots(SearchSpace):
    """``n_knots`` ratios over depth -> one budget per layer (all KV heads of a layer alike)."""

    granularity = "layer"
    n_knots = N_KNOTS

    @property
    def n_units(self) -> int:
        return min(self.n_knots, self.num_layers)

    def weights(self) -> np.ndarray:
        """``[num_layers, n_units]`` interpolation weights: layer ratios = ``weights @ knot ratios``.

        Each row holds at most two non-zeros that sum to 1 (hat functions), so all-ones knots
        decode to all-ones layers: the uniform start is the uniform profile.
        """
        layers, knots = self.num_layers, self.n_units
        if knots == 1:
            return np.ones((layers, 1))
        positions = np.linspace(0.0, knots - 1.0, layers)  # each layer's place on the knot axis
        out = np.zeros((layers, knots))
        left = np.minimum(np.floor(positions).astype(int), knots - 2)
        frac = positions - left
        out[np.arange(layers), left] = 1.0 - frac
        out[np.arange(layers), left + 1] = frac
        return out

    @property
    def total_budget(self) -> int:
        """Tokens over all *layers* at the target: ``round(c * num_layers)``."""
        return round(self.target * self.num_layers)

    def decode(self, ratios: np.ndarray) -> np.ndarray:
        """Knot ratios ``[n_units]`` -> int64 budgets ``[num_layers, num_kv_heads]`` (see the module docstring)."""
        ratios = np.asarray(ratios, dtype=np.float64)
        if ratios.shape != (self.n_units,):
            raise ValueError(f"{self.name}: expected ratios of shape ({self.n_units},), got {ratios.shape}")
        if not np.all(np.isfinite(ratios)):
            raise ValueError(f"{self.name}: ratios must be finite, got {ratios}")
        layer_ratios = self.weights() @ np.clip(ratios, *self.ratio_bounds)
        budgets = np.clip(np.floor(layer_ratios * self.target + 0.5).astype(np.int64), self.min_budget, self.max_budget)
        if self.exact_total:
            budgets = complete_budgets(budgets, self.total_budget, floor=self.min_budget)
        return np.repeat(budgets[:, None], self.num_kv_heads, axis=1).astype(np.int64)

    def _from_grid(self, grid: np.ndarray) -> np.ndarray:
        # Least-squares knots for the layer means: an existing profile seeds the search as
        # closely as a piecewise-linear shape can follow it.
        knots, *_ = np.linalg.lstsq(self.weights(), grid.mean(axis=1), rcond=None)
        return knots

    def _to_grid(self, values: np.ndarray) -> np.ndarray:
        # [n_units] -> [L, H] through the interpolation (only ``decode`` is used by the search).
        return np.repeat((self.weights() @ values)[:, None], self.num_kv_heads, axis=1)
