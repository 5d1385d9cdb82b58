"""What decoding observes for decode-time eviction, recorded inside evolalloc's attention function.

The prefill's capture (``runtime/capture.py``) sees a whole prompt at once; while decoding a scorer
that ranks generated tokens needs what is known online, per layer and per row of the batch:

* the last ``w`` fed queries (``CaptureSpec.window_queries``: SnapKV's observation window, TOVA's
  last query), kept as vectors ``[B, Hq, w, D]`` with their positions. Their attention over the
  cache is computed only when an eviction asks (``recent_attention``), over the tokens then cached
  that each query could see (causal by original position, within a sliding layer's window): storing
  attention rows instead would cost ``[B, Hq, w, S]`` per layer for the whole decode;
* the attention every fed query paid to every cached token, summed (``attention_sum``: H2O),
  averaged over each KV group's query heads, ``[B, Hkv, S]``, aligned with the layer's slots and
  carried through each eviction. This one costs one more ``q x S`` product per layer and step.

Nothing is observed when decode-time eviction is off: the attention function only looks for it.
Queries of padding columns (chunks of different lengths batched, ``EvictedCache.mark_next_chunk``)
are never kept, so a row's window is what it would be decoded alone.
"""

from __future__ import annotations

import torch

from evolalloc.runtime.capture import CaptureSpec


def attention_probabilities(query: torch.Tensor, key: torch.Tensor, visible: torch.Tensor | None, scaling: float,
                            softcap: float | None = None) -> torch.Tensor:
    """Softmax attention ``[B, Hq, q, S]`` float32 of query ``[B, Hq, q, D]`` over key ``[B, Hkv, S, D]``.

    ``visible``: bool broadcastable to ``[B, Hkv, q, S]`` (per KV head) or ``None`` (all). A query
    that sees nothing gets a row of zeros. Soft-capped logits as the model computes them.
    """
    batch, kv_heads, slots, dim = key.shape
    n_rep, q_len = query.shape[1] // kv_heads, query.shape[2]
    # Each KV head's query heads as one block of rows [B, Hkv, n_rep * q, D]: one product per KV head, the
    # keys never repeated (the same dot products as over repeated keys, half the time).
    # The products' fresh tensors are scaled, capped and masked in place (the same values, no copies).
    grouped = query.float().reshape(batch, kv_heads, n_rep * q_len, dim)
    logits = torch.matmul(grouped, key.float().transpose(2, 3)).mul_(scaling)
    logits = logits.view(batch, kv_heads, n_rep, q_len, slots)
    if softcap:
        logits = logits.div_(softcap).tanh_().mul_(softcap)
    if visible is not None:  # [B or 1, Hkv or 1, q, S], broadcast over each group's query heads
        logits.masked_fill_(~(visible.unsqueeze(2) if visible.dim() == 4 else visible), float("-inf"))
    return torch.softmax(logits, dim=-1).nan_to_num_(0.0).view(batch, kv_heads * n_rep, q_len, slots)


class OnlineCapture:
    """Per layer: the last ``spec.window_queries`` fed queries, and the accumulated attention if
    ``spec.attention_sum``. ``seed_sums`` starts a layer's sums from the prefill's (H2O)."""

    def __init__(self, spec: CaptureSpec, num_layers: int):
        self.window = spec.window_queries
        self.summed = spec.attention_sum
        self.queries: list[torch.Tensor | None] = [None] * num_layers  # [B, Hq, w', D], newest last
        self.query_positions: list[torch.Tensor | None] = [None] * num_layers  # [B, w'] long
        self.query_real: list[torch.Tensor | None] = [None] * num_layers  # [B, w'] bool (a row's first steps)
        self.sums: list[torch.Tensor | None] = [None] * num_layers  # [B, Hkv, S_l] float32
        self.layer_args: list[tuple[float, int | None, float | None] | None] = [None] * num_layers

    def seed_sums(self, layer: int, sums: torch.Tensor) -> None:
        """The accumulated attention ``[B, Hkv, S]`` of a layer's slots before the first fed token."""
        self.sums[layer] = sums.float()

    def observe(self, layer: int, query: torch.Tensor, key: torch.Tensor, visible: torch.Tensor | None,
                scaling: float, sliding: int | None, softcap: float | None, positions: torch.Tensor,
                real: torch.Tensor | None) -> None:
        """One forward's queries ``[B, Hq, q, D]`` over the layer's keys ``[B, Hkv, S, D]`` (new ones last),
        with the mask the attention used (``visible``), the queries' ``positions`` ``[B, q]`` and which
        columns are real tokens (``real`` ``[B, q]``; ``None``: all)."""
        self.layer_args[layer] = (scaling, sliding, softcap)
        if self.window:
            self._keep_queries(layer, query, positions, real)
        if self.summed:
            fresh = attention_probabilities(query, key, visible, scaling, softcap)  # [B, Hq, q, S]
            if real is not None:
                fresh = fresh * real[:, None, :, None]
            batch, kv_heads, slots = key.shape[0], key.shape[1], key.shape[2]
            received = fresh.sum(dim=2).view(batch, kv_heads, -1, slots).mean(dim=2)  # [B, Hkv, S]
            known = self.sums[layer]
            if known is None:
                known = received.new_zeros(batch, kv_heads, 0)
            self.sums[layer] = torch.cat([known, known.new_zeros(batch, kv_heads, slots - known.shape[-1])],
                                         dim=-1) + received

    def _keep_queries(self, layer: int, query, positions, real) -> None:
        """Append this forward's real queries to the layer's window; keep each row's last ``w``."""
        batch, _, q_len, _ = query.shape
        real = torch.ones(batch, q_len, dtype=torch.bool, device=query.device) if real is None else real.bool()
        positions = positions.to(query.device).expand(batch, q_len)
        kept = self.queries[layer]
        if kept is not None:
            query = torch.cat([kept, query], dim=2)
            positions = torch.cat([self.query_positions[layer], positions], dim=1)
            real = torch.cat([self.query_real[layer], real], dim=1)
        if not bool(real.all()):  # padding columns: move each row's real queries last, in order
            order = torch.argsort(real.to(torch.int8), dim=1, stable=True)
            query = query.gather(2, order[:, None, :, None].expand(-1, query.shape[1], -1, query.shape[3]))
            positions, real = positions.gather(1, order), real.gather(1, order)
        w = min(self.window, query.shape[2])
        self.queries[layer] = query[:, :, -w:].contiguous()
        self.query_positions[layer], self.query_real[layer] = positions[:, -w:], real[:, -w:]

    def recent_attention(self, layer: int, keys: torch.Tensor, positions: torch.Tensor,
                         valid: torch.Tensor) -> torch.Tensor | None:
        """``[B, Hq, w, S]`` float32: each kept query's attention over keys ``[B, Hkv, S, D]`` at original
        ``positions`` ``[B, Hkv, S]`` (``valid`` ``[B, Hkv, S]``), each query seeing the valid keys not
        after it (and within the layer's sliding window); zero rows for queries not yet fed."""
        queries = self.queries[layer]
        if queries is None:
            return None
        scaling, sliding, softcap = self.layer_args[layer]
        at = self.query_positions[layer][:, None, :, None]  # [B, 1, w, 1]
        key_pos = positions[:, :, None, :]  # [B, Hkv, 1, S]
        visible = valid[:, :, None, :] & (key_pos <= at)
        if sliding is not None:
            visible = visible & (key_pos > at - int(sliding))
        rows = attention_probabilities(queries, keys, visible, scaling, softcap)
        return rows * self.query_real[layer][:, None, :, None]

    def compact(self, layer: int, slots: torch.Tensor) -> None:
        """The layer's slots were rearranged to ``slots`` ``[B, Hkv, W]`` (indices of the old ones)."""
        if self.sums[layer] is not None:
            self.sums[layer] = self.sums[layer].gather(-1, slots)

    def select_rows(self, rows: torch.Tensor) -> None:
        """Keep only the given batch rows (finished sequences leave the batch)."""
        for store in (self.queries, self.query_positions, self.query_real, self.sums):
            for layer, tensor in enumerate(store):
                if tensor is not None:
                    store[layer] = tensor.index_select(0, rows.to(tensor.device))
