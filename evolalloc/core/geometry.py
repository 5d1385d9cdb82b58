"""The shape of a model's KV cache, independent of torch/transformers."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ModelGeometry:
    """What an allocation must match: one budget per (layer, KV head).

    ``bytes_per_token_per_head`` is what one cached token costs in one (layer, KV head):
    key + value, ``2 * head_dim * dtype_bytes``.
    """

    num_layers: int
    num_query_heads: int
    num_kv_heads: int
    head_dim: int
    max_positions: int
    dtype_bytes: int = 4

    @property
    def group_size(self) -> int:
        """Query heads that share one KV head (GQA)."""
        return self.num_query_heads // self.num_kv_heads

    @property
    def bytes_per_token_per_head(self) -> int:
        return 2 * self.head_dim * self.dtype_bytes

    def to_dict(self) -> dict:
        return asdict(self)
