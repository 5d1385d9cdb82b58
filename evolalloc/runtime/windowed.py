"""Windowed-attention evaluation: the prefill and the decoding both slide a per-layer window.

For scorers with ``windowed_attention`` (``scorers/window.py``, TensorRT-LLM's semantics). A
``PrefillRecord`` made by the ordinary full-attention prefill does not depend on the budgets;
here it does, so each (record, budgets) row is prefilled again from ``record.prompt_ids`` with
layer ``l`` attending to its last ``W_l = budgets[l]`` tokens (itself included). The row's record
is then an ordinary record of that windowed prefill, whose ranking (recency) keeps the last
``W_l`` tokens, and the evicted cache carries ``windows`` so that decoding keeps sliding.
"""

from __future__ import annotations

import numpy as np
import torch

from evolalloc.runtime.capture import PrefillCapture
from evolalloc.runtime.chunked import prefill_forward
from evolalloc.runtime.prefill import PrefillRecord
from evolalloc.runtime.scorers import Scorer
from evolalloc.runtime.scorers.base import LayerStats
from evolalloc.runtime.support import text_config


def layer_windows(budgets: np.ndarray) -> np.ndarray:
    """``[layers]`` windows from budgets ``[layers, kv_heads]``; heads of a layer must agree."""
    budgets = np.asarray(budgets)
    if budgets.ndim == 2 and np.any(budgets != budgets[:, :1]):
        raise ValueError("windowed attention has one window per layer; this "
                         "allocation gives KV heads of a layer different budgets")
    return budgets[:, 0] if budgets.ndim == 2 else budgets


@torch.no_grad()
def windowed_record(model, record: PrefillRecord, budgets: np.ndarray, scorer: Scorer) -> PrefillRecord:
    """Prefill ``record.prompt_ids`` again with per-layer sliding windows ``budgets[:, 0]``."""
    if record.prompt_ids is None:
        raise ValueError(f"record {record.uid!r} has no prompt_ids to prefill under windows")
    windows = layer_windows(budgets)
    ids = record.prompt_ids.reshape(1, -1)
    capture = PrefillCapture()
    # In chunks past ONE_SHOT_TOKENS: the window mask is then [chunk, L], not [L, L].
    last_logits = prefill_forward(model, ids, capture, windows=[int(w) for w in windows])
    layers = range(text_config(model.config).num_hidden_layers)
    keys = [capture.keys[i] for i in layers]
    values = [capture.values[i] for i in layers]
    ranking = torch.stack([scorer.rank(LayerStats(layer_idx=i, keys=keys[i], values=values[i])) for i in layers])
    return PrefillRecord(uid=record.uid, length=record.length, keys=keys, values=values,
                         first_logits=last_logits.float(),
                         rankings={scorer.key: ranking}, question_ids=record.question_ids, prompt_ids=record.prompt_ids,
                         reach=record.reach)  # a sliding model: its windows still bound each layer


def set_cache_windows(cache, rows) -> None:
    """Give ``cache`` (built from ``rows`` = (record, budgets) pairs) each row's per-layer windows."""
    windows = np.stack([layer_windows(b) for _, b in rows])  # [B, layers]
    device = cache.keys[0].device
    cache.windows = [torch.as_tensor(windows[:, layer], dtype=torch.long, device=device)
                     for layer in range(windows.shape[1])]
