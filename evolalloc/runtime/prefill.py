"""Prefill once: one full-attention forward whose record serves every allocation afterwards.

SnapKV-style eviction happens after a full prefill, so the prefill and each (layer, KV head)
ranking do not depend on the budget; the kept set at budget ``b`` is the top-``b`` prefix of
the ranking. A ``PrefillRecord`` therefore holds everything any allocation needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from evolalloc.core.geometry import window_cap
from evolalloc.runtime.capture import CaptureSpec, PrefillCapture
from evolalloc.runtime.chunked import prefill_forward
from evolalloc.runtime.scorers import Scorer
from evolalloc.runtime.scorers.base import LayerStats
from evolalloc.runtime.sliding import reachable_first
from evolalloc.runtime.support import sliding_windows, text_config


@dataclass
class PrefillRecord:
    """One instance, prefilled.

    ``keys``/``values``: per layer ``[Hkv, L, D]`` (keys after RoPE).
    ``first_logits``: ``[V]`` logits after the last prefilled token (the first answer token when
    the whole prompt was prefilled).
    ``rankings``: scorer key (``Scorer.key``) -> ``[num_layers, Hkv, L]`` int64 positions, most important first.
    ``question_ids``: ``[q]`` tokens to feed after eviction (query-agnostic setting), or ``None``.
    ``scores``: scorer key -> ``[num_layers, Hkv, L]`` float32, each head's scores in ranking
    order (always-kept tokens ``+inf``), for the budget adapters that compare heads (AdaKV); for a
    scorer with ``records_prefill_sums`` also ``sums_key`` -> each head's accumulated attention in
    that ranking's order (where its decode-time eviction starts the sums from).
    ``dispersion``: ``[num_layers, 2]`` float32 (entropy, variance) of each layer's window
    attention (``window_dispersion``), for CAKE's layer preference; ``None`` when no scorer
    captured a window.
    ``prompt_ids``: ``[L]`` the prefilled tokens (a windowed-attention scorer prefills them again
    under each allocation's windows, see ``runtime/windowed.py``).
    ``bound``: ``None`` for a full record; ``b_max`` for a bounded one (``runtime/bounded.py``):
    then keys/values per layer are ``[Hkv, m, D]`` holding only each head's union of the
    rankings' top-``b_max`` prefixes, rankings ``[num_layers, Hkv, b_max]`` index those slots
    and scores keep their first ``b_max`` columns.
    ``compute_dtype``: the dtype the model computes in when keys/values are stored in another
    (``engine.record_dtype``); compression casts back to it. ``None``: the stored dtype.
    ``reach``: ``[num_layers]`` the most prompt tokens each layer can attend to after the prompt
    (the length; ``W - 1`` for a sliding layer of window ``W`` on a longer prompt); compression
    clips budgets to it, and tracks kept positions for such a model. ``None``: a model without
    sliding layers (the length everywhere).
    ``slot_positions``: a bounded record's ``[num_layers, Hkv, m]`` original position of each
    stored slot (``m`` the widest layer; spare slots 0), so that sliding-window layers can mask by
    position after eviction; ``None`` in a full record, where slot = position.
    ``continuations``: the full cache's own greedy continuations of the prompt
    (``runtime/continuation.py``), by decoding settings; made on first need and kept here, so the
    evaluators that share the record share them. Never spilled: a process that maps the record from
    disk writes them again (the same tokens).
    """

    uid: str
    length: int
    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    first_logits: torch.Tensor
    rankings: dict[str, torch.Tensor] = field(default_factory=dict)
    question_ids: torch.Tensor | None = None
    scores: dict[str, torch.Tensor] = field(default_factory=dict)
    dispersion: torch.Tensor | None = None
    prompt_ids: torch.Tensor | None = None
    bound: int | None = None
    compute_dtype: torch.dtype | None = None
    slot_positions: torch.Tensor | None = None
    reach: torch.Tensor | None = None
    continuations: dict = field(default_factory=dict, repr=False, compare=False)

    def layer_reach(self) -> np.ndarray:
        """``[num_layers]`` int64: the most tokens each layer can use (see ``reach``)."""
        if self.reach is None:
            return np.full(self.num_layers, self.length, dtype=np.int64)
        return self.reach.cpu().numpy().astype(np.int64)

    def positions_of(self, slots: torch.Tensor) -> torch.Tensor:
        """Original positions of stored ``slots`` ``[num_layers, Hkv, n]`` (identity in a full record)."""
        if self.slot_positions is None:
            return slots
        table = self.slot_positions.to(slots.device)
        return torch.gather(table, 2, slots.clamp(max=table.shape[2] - 1))

    @property
    def slots(self) -> int:
        """Token slots stored per head (the most of any layer): the prompt length, or fewer in a bounded record."""
        return max(shape[1] for shape in self.kv_shapes())

    def kv_shapes(self) -> list[tuple[int, ...]]:
        """Each layer's keys shape ``[Hkv, slots, D]``, read without touching the tensors (a spilled
        record's ``keys`` know their shapes: asking them does not map the file)."""
        known = getattr(self.keys, "shapes", None)
        return list(known) if known is not None else [tuple(k.shape) for k in self.keys]

    @property
    def num_layers(self) -> int:
        return len(self.keys)

    def nbytes(self) -> int:
        """Bytes held by the record's tensors (K/V, logits, rankings, scores)."""
        tensors = [*self.keys, *self.values, self.first_logits, *self.rankings.values(), *self.scores.values()]
        return sum(t.numel() * t.element_size() for t in tensors)


@torch.no_grad()
def prefill(
    model,
    prompt_ids: torch.Tensor | Sequence[int],
    scorers: Sequence[Scorer],
    *,
    uid: str = "",
    question_ids: torch.Tensor | Sequence[int] | None = None,
    chunk_size: int | None = None,
) -> PrefillRecord:
    """Run one full-attention forward over ``prompt_ids`` and rank tokens for each scorer.

    ``prompt_ids``: ``[L]`` token ids (the context, in the query-agnostic setting).
    ``question_ids``: ``[q]`` tokens kept aside and fed after eviction, or ``None``.
    ``chunk_size``: a longer prompt is fed in chunks of this many tokens (``runtime/chunked.py``;
    ``None``: one shot up to 2048 tokens, chunks of 512 beyond), so its prefill needs memory linear
    in ``L``; the record is the same up to float rounding.
    The model must use evolalloc's attention (``load_model`` switches it).
    """
    device = next(model.parameters()).device
    ids = torch.as_tensor(prompt_ids, dtype=torch.long, device=device).reshape(1, -1)
    length = ids.shape[1]
    if length == 0:
        raise ValueError("prefill needs at least one prompt token")
    if model.config._attn_implementation != "evolalloc":
        raise ValueError("the model does not use evolalloc attention; load it "
                         "with load_model() or call use_evolalloc_attention(model)")
    num_layers = text_config(model.config).num_hidden_layers
    windows = sliding_windows(model.config)
    ranked = {scorer.key: ([None] * num_layers, [None] * num_layers) for scorer in scorers}
    summed = {scorer.sums_key: [None] * num_layers for scorer in scorers if scorer.records_prefill_sums}
    dispersion_rows: list[torch.Tensor | None] = [None] * num_layers

    def rank_layer(layer: int) -> None:
        # Ranked as soon as the layer's capture is complete, then its window rows ([Hq, w, L])
        # are dropped: one layer's rows alive at a time instead of every layer's.
        stats = LayerStats(
            layer_idx=layer,
            keys=capture.keys[layer],
            values=capture.values[layer],
            window_attention=capture.window_attention.get(layer),
            attention_sum=capture.attention_sums.get(layer),
        )
        for scorer in scorers:
            per_layer, per_layer_scores = ranked[scorer.key]
            # A sliding layer's unreachable tokens rank last (runtime/sliding.py).
            per_layer[layer], per_layer_scores[layer] = reachable_first(*scorer.rank_scored(stats), length,
                                                                        windows[layer])
            if scorer.records_prefill_sums:  # the accumulated attention beside its scores, in ranking order
                summed[scorer.sums_key][layer] = stats.per_kv_head(stats.attention_sum).float().gather(
                    -1, per_layer[layer])
        window = capture.window_attention.pop(layer, None)
        if window is not None:
            dispersion_rows[layer] = window_dispersion(window)
        capture.attention_sums.pop(layer, None)

    capture = PrefillCapture(CaptureSpec.union(s.capture for s in scorers), on_layer_done=rank_layer)
    try:
        last_logits = prefill_forward(model, ids, capture, chunk_size=chunk_size)
    finally:
        # rank_layer closes over capture: without this cycle-break the whole prompt's K/V waits for
        # Python's cycle collector after the record is bounded (on a GPU, 2 whole records' worth of
        # device memory was still allocated: results/gpu-check/).
        capture.on_layer_done = None
    keys = [capture.keys[i] for i in range(num_layers)]
    values = [capture.values[i] for i in range(num_layers)]
    rankings = {key: torch.stack(per_layer) for key, (per_layer, _) in ranked.items()}
    scores = {key: torch.stack(per_layer_scores) for key, (_, per_layer_scores) in ranked.items()}
    scores.update({key: torch.stack(sums) for key, sums in summed.items()})
    dispersion = torch.stack(dispersion_rows) if dispersion_rows and dispersion_rows[0] is not None else None
    question = None
    if question_ids is not None:
        question = torch.as_tensor(question_ids, dtype=torch.long, device=device).reshape(-1)
    return PrefillRecord(uid=uid, length=length, keys=keys, values=values, first_logits=last_logits.float(),
                         rankings=rankings, question_ids=question, scores=scores, dispersion=dispersion,
                         prompt_ids=ids[0], reach=layer_reach(length, windows))


def layer_reach(length: int, windows: Sequence[int | None]) -> torch.Tensor | None:
    """``[num_layers]`` the most prompt tokens each layer can use; ``None`` for a model without
    sliding layers (then every layer sees the whole prompt, and no position needs tracking)."""
    if all(w is None for w in windows):
        return None
    return torch.tensor([length if w is None else min(length, window_cap(w)) for w in windows], dtype=torch.long)


def window_dispersion(attention: torch.Tensor) -> torch.Tensor:
    """CAKE's two measures of one layer's window attention ``[Hq, w, L]`` -> ``[2]`` float32.

    * spatial dispersion: the entropy of the window's mean attention over the keys,
      ``-sum_j a_j log a_j`` with ``a = mean_i A[i, :]`` (high when the layer looks everywhere);
    * temporal shift: the variance over the window queries of each key's attention, summed
      over keys (high when what the layer looks at changes from query to query).
    Both are averaged over the query heads (CAKE computes them per head and averages).
    """
    attention = attention.float()
    mean = attention.mean(dim=1)  # [Hq, L]
    entropy = -(mean * torch.log(mean.clamp_min(1e-12))).sum(dim=-1)
    variance = attention.var(dim=1, unbiased=False).sum(dim=-1) if attention.shape[1] > 1 else torch.zeros_like(entropy)
    return torch.stack([entropy.mean(), variance.mean()])
