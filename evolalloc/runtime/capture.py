"""What the prefill forward records on the side, layer by layer, inside the attention function."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import torch

# Queries per chunk when accumulating full attention (bounds memory to chunk x L per head).
_SUM_CHUNK = 256


@dataclass(frozen=True)
class CaptureSpec:
    """The attention statistics a scorer needs the prefill to record, besides keys and values.

    ``window_queries``: the softmax attention of the last ``w`` queries (SnapKV, TOVA); 0: none.
    ``attention_sum``: every query's attention to every key, summed (H2O).
    """

    window_queries: int = 0
    attention_sum: bool = False

    def __or__(self, other: "CaptureSpec") -> "CaptureSpec":
        """What serves both: the wider window, and the sum if either needs it."""
        return CaptureSpec(max(self.window_queries, other.window_queries), self.attention_sum or other.attention_sum)

    @staticmethod
    def union(specs: Iterable["CaptureSpec"]) -> "CaptureSpec":
        total = CaptureSpec()
        for spec in specs:
            total = total | spec
        return total


class PrefillCapture:
    """Collects per-layer keys/values and the attention statistics ``spec`` asks for.

    The batch is one instance, so tensors drop the batch dimension.
    """

    def __init__(self, spec: CaptureSpec = CaptureSpec()):
        self.spec = spec
        self.window_queries = spec.window_queries
        self.attention_sum = spec.attention_sum
        self.keys: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}
        self.window_attention: dict[int, torch.Tensor] = {}
        self.attention_sums: dict[int, torch.Tensor] = {}

    def record(self, layer_idx: int, query, key, value, scaling: float) -> None:
        """query ``[1, Hq, L, D]``, key/value ``[1, Hkv, L, D]`` of a full causal prefill."""
        if query.shape[0] != 1:
            raise ValueError("prefill capture takes one instance at a time")
        self.keys[layer_idx] = key[0]
        self.values[layer_idx] = value[0]
        if not (self.window_queries or self.attention_sum):
            return  # keys and values are all this spec asks for
        n_rep = query.shape[1] // key.shape[1]
        keys = key[0].repeat_interleave(n_rep, dim=0)  # [Hq, L, D]
        length = keys.shape[1]
        if self.window_queries:
            w = min(self.window_queries, length)
            self.window_attention[layer_idx] = _attention_rows(query[0, :, length - w :], keys, scaling, length - w)
        if self.attention_sum:
            total = torch.zeros(keys.shape[0], length, dtype=torch.float32, device=keys.device)
            for start in range(0, length, _SUM_CHUNK):
                rows = query[0, :, start : start + _SUM_CHUNK]
                total += _attention_rows(rows, keys, scaling, start).sum(dim=1)
            self.attention_sums[layer_idx] = total


def _attention_rows(queries: torch.Tensor, keys: torch.Tensor, scaling: float, first_position: int) -> torch.Tensor:
    """Causal softmax attention of queries at positions ``first_position + i``.

    queries ``[Hq, n, D]``, keys ``[Hq, L, D]`` -> ``[Hq, n, L]`` float32.
    """
    logits = torch.matmul(queries.float(), keys.float().transpose(1, 2)) * scaling
    n, length = queries.shape[1], keys.shape[1]
    rows = torch.arange(n, device=keys.device)[:, None] + first_position
    future = torch.arange(length, device=keys.device)[None, :] > rows
    return torch.softmax(logits.masked_fill(future, float("-inf")), dim=-1)
