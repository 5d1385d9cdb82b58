"""Sliding window with windowed attention: TensorRT-LLM's cyclic KV cache, evaluated as it runs.

TensorRT-LLM's ``KvCacheConfig.max_attention_window`` (one window ``W`` per layer) keeps the last
``W`` tokens in a circular buffer, and when the prompt is longer than ``W`` its context phase
already uses sliding-window attention. That is not "full prefill, then evict" (which is what
every other scorer, ``streaming`` included, evaluates): a layer's window changes what its prompt
tokens saw, so later layers' keys change too. With this scorer the runtime re-runs the prefill
of each (instance, allocation) with layer ``l`` attending to its last ``budgets[l]`` tokens, keeps
those ``W`` tokens, and decodes with the window sliding (``runtime/windowed.py``).

It costs one prefill per candidate instead of one per instance; that is the price of searching
a profile under the semantics it will be served with. Layer granularity only (one window per
layer, as TensorRT-LLM has), no sinks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import LayerStats, Scorer


@register_scorer("window")
@dataclass
class Window(Scorer):
    windowed_attention: ClassVar[bool] = True
    why_not_generated = "its windows already slide while decoding (TensorRT-LLM's cyclic cache holds them)"

    def __post_init__(self):
        if self.sinks or self.window:
            raise ValueError("the window scorer keeps the last budget tokens only "
                             "(TensorRT-LLM's cyclic cache): no sinks, no window parameter")

    def score(self, stats: LayerStats) -> torch.Tensor:
        recency = torch.arange(stats.length, device=stats.keys.device, dtype=torch.float32)
        return recency.expand(stats.keys.shape[0], -1)
