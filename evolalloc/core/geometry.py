"""The shape of a model's KV cache, independent of torch/transformers."""

from __future__ import annotations

from dataclasses import asdict, dataclass


def window_cap(window: int | None) -> int | None:
    """The most prompt tokens a layer of sliding window ``window`` can attend to after the prompt:
    at the first answer token the query itself is the ``W``-th, so ``W - 1``; ``None`` for a full layer."""
    return None if window is None else max(int(window) - 1, 1)


@dataclass(frozen=True)
class ModelGeometry:
    """What an allocation must match: one budget per (layer, KV head).

    ``bytes_per_token_per_head`` is what one cached token costs in one (layer, KV head):
    key + value, ``2 * head_dim * dtype_bytes``.
    ``windows``: per layer the model's sliding window (``None`` for a full-attention layer), or
    ``None`` when no layer slides. A sliding layer of window ``W`` can use at most ``W - 1``
    prompt tokens (``caps``), so no budget gives it more. Models whose layers differ in KV-head
    count or head size are refused before a geometry is made (``runtime/support.py``).
    """

    num_layers: int
    num_query_heads: int
    num_kv_heads: int
    head_dim: int
    max_positions: int
    dtype_bytes: int = 4
    windows: tuple[int | None, ...] | None = None

    def __post_init__(self):
        if self.windows is not None:
            windows = tuple(None if w is None else int(w) for w in self.windows)
            if len(windows) != self.num_layers:
                raise ValueError(f"windows has {len(windows)} entries, expected one per layer ({self.num_layers})")
            object.__setattr__(self, "windows", windows if any(w is not None for w in windows) else None)

    @property
    def sliding_layers(self) -> tuple[int, ...]:
        """Indices of the layers with a sliding window."""
        return tuple(i for i, w in enumerate(self.windows or ()) if w is not None)

    def caps(self) -> list[int | None]:
        """Per layer the most prompt tokens a budget can usefully give it (``W - 1``), or ``None``."""
        return [window_cap(w) for w in (self.windows or [None] * self.num_layers)]

    @property
    def group_size(self) -> int:
        """Query heads that share one KV head (GQA)."""
        return self.num_query_heads // self.num_kv_heads

    @property
    def bytes_per_token_per_head(self) -> int:
        return 2 * self.head_dim * self.dtype_bytes

    def to_dict(self) -> dict:
        """Plain fields; ``windows`` only when some layer slides (files of full-attention models
        stay as they were)."""
        data = asdict(self)
        if self.windows is None:
            del data["windows"]
        else:
            data["windows"] = list(self.windows)
        return data
