"""The evicted KV cache: per-layer slots of different lengths, with room to decode into.

transformers' ``DynamicCache`` wants one length per layer and reports it as the sequence length,
which is wrong after eviction. This cache is what the model's attention modules call
``update()`` on; evolalloc's attention function reads ``valid`` to mask padded slots.

Layout, per layer ``l``: ``keys[l]``/``values[l]`` are buffers ``[B, Hkv, S_l + room, D]``, of
which the first ``used[l]`` slots are filled. ``valid[l]`` is ``[B, Hkv, used[l]]`` bool, or
``None`` when every filled slot of every row and head is valid (then no mask is built at all).
Rows are independent sequences: (instance, allocation) pairs.
"""

from __future__ import annotations

import torch


class EvictedCache:
    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor], valid: list[torch.Tensor | None],
                 room: int):
        """``keys``/``values``: per layer ``[B, Hkv, S_l, D]``; ``valid``: per layer ``[B, Hkv, S_l]`` or None.

        ``room``: how many more tokens will be appended (buffers are allocated once).
        """
        self.keys, self.values, self.valid, self.used = [], [], [], []
        for k, v, m in zip(keys, values, valid):
            b, h, s, d = k.shape
            kbuf = k.new_empty(b, h, s + room, d)
            vbuf = v.new_empty(b, h, s + room, d)
            kbuf[:, :, :s] = k
            vbuf[:, :, :s] = v
            self.keys.append(kbuf)
            self.values.append(vbuf)
            self.valid.append(m)
            self.used.append(s)
        self._pending_valid: torch.Tensor | None = None
        # Original positions of each layer's slots ``[B, Hkv, used]`` (compression fills them; the
        # attention function appends new tokens'), for the model's sliding windows; None: untracked.
        self.positions: list[torch.Tensor] | None = None
        # Sliding windows while decoding (TensorRT-LLM semantics, ``runtime/windowed.py``): per
        # layer a ``[B]`` long tensor of window sizes, or None for plain attention to every slot.
        self.windows: list[torch.Tensor | None] | None = None
        # Decode-time eviction (``runtime/decode_eviction.py``: HeldBudgets), or None: prompt-only.
        self.held = None

    @classmethod
    def adopt(cls, keys: list[torch.Tensor], values: list[torch.Tensor], valid: list[torch.Tensor | None],
              used: list[int],
              positions: list[torch.Tensor] | None = None) -> "EvictedCache":
        """A cache over buffers already allocated with room: per layer ``[B, Hkv, used[l] + room, D]``
        whose first ``used[l]`` slots are filled (no copy, unlike the constructor). ``positions``:
        per layer ``[B, Hkv, used[l]]`` the slots' original positions, or None."""
        cache = cls.__new__(cls)
        cache.keys, cache.values, cache.valid, cache.used = list(keys), list(values), list(valid), list(used)
        cache._pending_valid = None
        cache.positions = list(positions) if positions is not None else None
        cache.windows = None
        cache.held = None
        return cache

    @property
    def batch_size(self) -> int:
        return self.keys[0].shape[0]

    def mark_next_chunk(self, valid: torch.Tensor | None) -> None:
        """Validity ``[B, q]`` of the tokens the next forward appends (``None``: all valid).

        Used when chunks of different lengths are batched: pad tokens are appended but masked.
        """
        self._pending_valid = valid

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        """Append ``[B, Hkv, q, D]`` new keys/values; return the layer's filled slots."""
        n, q = self.used[layer_idx], key_states.shape[2]
        kbuf, vbuf = self.keys[layer_idx], self.values[layer_idx]
        if n + q > kbuf.shape[2]:
            raise RuntimeError(f"evicted cache layer {layer_idx} is full ({kbuf.shape[2]} slots)")
        kbuf[:, :, n : n + q] = key_states
        vbuf[:, :, n : n + q] = value_states
        self.used[layer_idx] = n + q
        mask = self.valid[layer_idx]
        if mask is not None or self._pending_valid is not None:
            b, h = kbuf.shape[:2]
            if mask is None:
                mask = torch.ones(b, h, n, dtype=torch.bool, device=kbuf.device)
            new = self._pending_valid
            new = torch.ones(b, h, q, dtype=torch.bool, device=kbuf.device) if new is None else new[:, None,
                                                                                                    :].expand(b, h, q)
            self.valid[layer_idx] = torch.cat([mask, new], dim=2)
        return kbuf[:, :, : n + q], vbuf[:, :, : n + q]

    def after_forward(self, fed: torch.Tensor) -> None:
        """A forward fed each row ``fed`` ``[B]`` tokens (padding excluded): decode-time eviction counts
        them and cuts the rows now due back to their budgets. Nothing without it."""
        if self.held is not None:
            self.held.after_forward(self, fed)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Filled slots of a layer. Not a position: callers must pass explicit ``position_ids``."""
        return self.used[layer_idx]

    def select_rows(self, rows: torch.Tensor) -> None:
        """Keep only the given batch rows (finished sequences leave the batch)."""
        for layer in range(len(self.keys)):
            self.keys[layer] = self.keys[layer].index_select(0, rows)
            self.values[layer] = self.values[layer].index_select(0, rows)
            if self.valid[layer] is not None:
                self.valid[layer] = self.valid[layer].index_select(0, rows)
            if self.positions is not None:
                self.positions[layer] = self.positions[layer].index_select(0, rows)
            if self.windows is not None and self.windows[layer] is not None:
                self.windows[layer] = self.windows[layer].index_select(0, rows)
        if self.held is not None:
            self.held.select_rows(rows)

    def filled_bytes(self) -> int:
        """Bytes of the filled slots (padding included, unused room excluded)."""
        total = 0
        for k, n in zip(self.keys, self.used):
            b, h, _, d = k.shape
            total += 2 * b * h * n * d * k.element_size()
        return total
