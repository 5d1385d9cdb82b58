"""Prefill once: one full-attention forward whose record serves every allocation afterwards.

SnapKV-style eviction happens after a full prefill, so the prefill and each (layer, KV head)
ranking do not depend on the budget; the kept set at budget ``b`` is the top-``b`` prefix of
the ranking. A ``PrefillRecord`` therefore holds everything any allocation needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from evolalloc.runtime.capture import CaptureSpec, PrefillCapture
from evolalloc.runtime.scorers import Scorer
from evolalloc.runtime.scorers.base import LayerStats


@dataclass
class PrefillRecord:
    """One instance, prefilled.

    ``keys``/``values``: per layer ``[Hkv, L, D]`` (keys after RoPE).
    ``first_logits``: ``[V]`` logits after the last prefilled token (the first answer token when
    the whole prompt was prefilled).
    ``rankings``: scorer key (``Scorer.key``) -> ``[num_layers, Hkv, L]`` int64 positions, most important first.
    ``question_ids``: ``[q]`` tokens to feed after eviction (query-agnostic setting), or ``None``.
    ``prompt_ids``: ``[L]`` the prefilled tokens (a windowed-attention scorer prefills them again
    under each allocation's windows, see ``runtime/windowed.py``).
    """

    uid: str
    length: int
    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    first_logits: torch.Tensor
    rankings: dict[str, torch.Tensor] = field(default_factory=dict)
    question_ids: torch.Tensor | None = None
    prompt_ids: torch.Tensor | None = None

    @property
    def num_layers(self) -> int:
        return len(self.keys)

    def nbytes(self) -> int:
        """Bytes held by the record's tensors (full K/V, logits, rankings)."""
        tensors = [*self.keys, *self.values, self.first_logits, *self.rankings.values()]
        return sum(t.numel() * t.element_size() for t in tensors)


@torch.no_grad()
def prefill(
    model,
    prompt_ids: torch.Tensor | Sequence[int],
    scorers: Sequence[Scorer],
    *,
    uid: str = "",
    question_ids: torch.Tensor | Sequence[int] | None = None,
) -> PrefillRecord:
    """Run one full-attention forward over ``prompt_ids`` and rank tokens for each scorer.

    ``prompt_ids``: ``[L]`` token ids (the context, in the query-agnostic setting).
    ``question_ids``: ``[q]`` tokens kept aside and fed after eviction, or ``None``.
    The model must use evolalloc's attention (``load_model`` switches it).
    """
    device = next(model.parameters()).device
    ids = torch.as_tensor(prompt_ids, dtype=torch.long, device=device).reshape(1, -1)
    length = ids.shape[1]
    if length == 0:
        raise ValueError("prefill needs at least one prompt token")
    if model.config._attn_implementation != "evolalloc":
        raise ValueError("the model does not use evolalloc attention; load it with load_model() or call use_evolalloc_attention(model)")
    capture = PrefillCapture(CaptureSpec.union(s.capture for s in scorers))
    positions = torch.arange(length, device=device)[None, :]
    out = model(input_ids=ids, position_ids=positions, use_cache=False, logits_to_keep=1, evolalloc_capture=capture)
    num_layers = model.config.num_hidden_layers
    keys = [capture.keys[i] for i in range(num_layers)]
    values = [capture.values[i] for i in range(num_layers)]

    rankings = {}
    for scorer in scorers:
        per_layer = []
        for layer in range(num_layers):
            stats = LayerStats(
                layer_idx=layer,
                keys=keys[layer],
                values=values[layer],
                window_attention=capture.window_attention.get(layer),
                attention_sum=capture.attention_sums.get(layer),
            )
            per_layer.append(scorer.rank(stats))
        rankings[scorer.key] = torch.stack(per_layer)
    question = None
    if question_ids is not None:
        question = torch.as_tensor(question_ids, dtype=torch.long, device=device).reshape(-1)
    return PrefillRecord(
        uid=uid,
        length=length,
        keys=keys,
        values=values,
        first_logits=out.logits[0, -1].float(),
        rankings=rankings,
        question_ids=question,
        prompt_ids=ids[0],
    )
