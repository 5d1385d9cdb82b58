"""Sampling the next token: temperature, top-k and top-p (nucleus), one generator per row.

Greedy decoding never comes here (``decode_batch`` keeps its ``argmax``), so greedy paths stay
bit-identical. Each row draws from its own ``torch.Generator``, so a row's tokens depend on its
seed only, never on which other rows share its batch: batched == one at a time.
"""

from __future__ import annotations

from typing import Sequence

import torch


def filter_logits(logits: torch.Tensor, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """``[B, V]`` logits -> ``[B, V]`` float32 probabilities after temperature, top-k and top-p.

    top-k keeps the ``k`` largest logits (0: all); top-p keeps the smallest set of most likely
    tokens whose probability reaches ``top_p`` (always at least one token).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for sampling, got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    scores = logits.float() / temperature
    if top_k and top_k < scores.shape[-1]:
        kth = torch.topk(scores, top_k, dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1:
        sorted_scores, order = scores.sort(dim=-1, descending=True)
        probs = sorted_scores.softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # mass of the tokens ranked above each one
        drop_sorted = before >= top_p
        drop_sorted[..., 0] = False
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        scores = scores.masked_fill(drop, float("-inf"))
    return scores.softmax(dim=-1)


def sample(logits: torch.Tensor, generators: Sequence[torch.Generator], *, temperature=1.0, top_k=0,
           top_p=1.0) -> torch.Tensor:
    """One token per row ``[B]`` from ``[B, V]`` logits, row ``i`` drawn with ``generators[i]``."""
    probs = filter_logits(logits, temperature, top_k, top_p).cpu()
    tokens = [torch.multinomial(probs[i], 1, generator=g)[0] for i, g in enumerate(generators)]
    return torch.stack(tokens).to(logits.device)


def row_generator(seed: int) -> torch.Generator:
    """A CPU generator for one row (sampling happens on CPU so a seed means the same on any device)."""
    return torch.Generator().manual_seed(int(seed))
