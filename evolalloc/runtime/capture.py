"""What the prefill forward records on the side, layer by layer, inside the attention function."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import torch

# Query rows alive at once when accumulating full attention (bounds memory to _SUM_CHUNK x L per head).
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

    The batch is one instance, so tensors drop the batch dimension. ``length``: the prompt's
    length ``L`` when the forward comes in chunks (``runtime/chunked.py``); ``None`` when one
    forward sees the whole prompt. Memory beyond the keys/values is ``O(L x w)``: the window rows
    ``[Hq, w, L]`` per layer, and the attention sum's running total ``[Hq, L]`` with at most
    ``_SUM_CHUNK`` query rows ``[Hq, _SUM_CHUNK, L]`` alive at a time — never ``L x L``.
    """

    def __init__(self, spec: CaptureSpec = CaptureSpec(), length: int | None = None,
                 on_layer_done: Callable[[int], None] | None = None):
        self.spec = spec
        # Called with a layer's index once its keys and statistics are complete (the prefill
        # ranks the layer then and drops its window rows: one layer's alive at a time, not all).
        self.on_layer_done = on_layer_done
        self.window_queries = spec.window_queries
        self.attention_sum = spec.attention_sum
        self.length = length
        self.keys: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}
        self.window_attention: dict[int, torch.Tensor] = {}
        self.attention_sums: dict[int, torch.Tensor] = {}

    def record(self, layer_idx: int, query, key, value, scaling: float, window: int | None = None,
               softcap: float | None = None) -> None:
        """query ``[1, Hq, q, D]`` of positions ``S - q .. S - 1``; key/value ``[1, Hkv, S, D]``,
        every key so far (``q == S`` in a one-shot prefill; one chunk's queries otherwise).
        ``window``/``softcap``: the layer's sliding window and logit soft-cap, so that the recorded
        attention is the attention the model computed (``runtime/sliding.py``).

        Each query's softmax row is complete here (a causal query sees no later key), so rows
        from different chunks are only padded with zeros to ``L`` and put side by side.
        """
        if query.shape[0] != 1:
            raise ValueError("prefill capture takes one instance at a time")
        # The last chunk's call carries every key: the earlier ones are overwritten.
        self.keys[layer_idx] = key[0]
        self.values[layer_idx] = value[0]
        if self.window_queries or self.attention_sum:
            self._record_statistics(layer_idx, query, key, scaling, window, softcap)
        if self.on_layer_done is not None and key.shape[2] == (self.length or key.shape[2]):
            self.on_layer_done(layer_idx)

    def _record_statistics(self, layer_idx: int, query, key, scaling: float, sliding, softcap) -> None:
        n_rep = query.shape[1] // key.shape[1]
        seen, q_len = key.shape[2], query.shape[2]
        total_length = self.length or seen
        first = seen - q_len  # position of this call's first query
        w = min(self.window_queries, total_length)
        start = max(total_length - w, first)  # the window queries among this call's
        if not (self.attention_sum or start < seen):
            return  # a chunk before the window, and no sum to add to
        keys = key[0].repeat_interleave(n_rep, dim=0)  # [Hq, S, D]
        if self.window_queries:
            if start < seen:
                # [Hq, m, S]
                rows = _attention_rows(query[0, :, start - first :], keys, scaling, start, sliding, softcap)
                if seen == total_length and start == total_length - w:
                    self.window_attention[layer_idx] = rows  # the one-shot case: no copy
                else:
                    window = self.window_attention.get(layer_idx)
                    if window is None:
                        window = rows.new_zeros(rows.shape[0], w, total_length)
                        self.window_attention[layer_idx] = window
                    row0 = start - (total_length - w)
                    window[:, row0 : row0 + rows.shape[1], :seen] = rows
        if self.attention_sum:
            total = self.attention_sums.get(layer_idx)
            if total is None:
                total = torch.zeros(keys.shape[0], total_length, dtype=torch.float32, device=keys.device)
                self.attention_sums[layer_idx] = total
            for offset in range(0, q_len, _SUM_CHUNK):
                rows = query[0, :, offset : offset + _SUM_CHUNK]
                total[:, :seen] += _attention_rows(rows, keys, scaling, first + offset, sliding, softcap).sum(dim=1)


def _attention_rows(queries: torch.Tensor, keys: torch.Tensor, scaling: float, first_position: int,
                    window: int | None = None, softcap: float | None = None) -> torch.Tensor:
    """Causal softmax attention of queries at positions ``first_position + i``, within the layer's
    sliding ``window`` (keys ``p - W < j <= p``) and soft-capped as the model does, when it does.

    queries ``[Hq, n, D]``, keys ``[Hq, L, D]`` -> ``[Hq, n, L]`` float32.
    """
    logits = torch.matmul(queries.float(), keys.float().transpose(1, 2)) * scaling
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    n, length = queries.shape[1], keys.shape[1]
    rows = torch.arange(n, device=keys.device)[:, None] + first_position
    cols = torch.arange(length, device=keys.device)[None, :]
    hidden = cols > rows
    if window is not None:
        hidden = hidden | (cols <= rows - int(window))
    return torch.softmax(logits.masked_fill(hidden, float("-inf")), dim=-1)
