"""Use transformers' own ``model.generate()`` on an evicted cache.

``generate()`` decides what to feed from ``past_key_values.get_seq_length()``: on a cache shorter
than the prompt it silently re-prefills the missing part, and it computes positions from the
attention mask. ``GenerateCache`` is a ``transformers.Cache`` around evolalloc's ``EvictedCache``
whose ``get_seq_length()`` is the *logical* length (the padded prompt length plus what was
appended), not the number of slots kept, so ``generate()`` feeds only the new token, at the
position the attention mask gives it: the original one.

The prefill's last logits give the first answer token (exactly as after a full prefill), so
``generate_inputs`` appends it to the prompt: ``generate()`` then continues from it. Usage::

    inputs = generate_inputs(model, tokenizer, prompts, "allocation-c128.json", max_new_tokens=32)
    with inputs.active():            # evolalloc's attention reads the evicted slots from here
        out = model.generate(**inputs.kwargs, max_new_tokens=31, do_sample=False)
    answers = inputs.answers(out)    # [first token] + generate()'s tokens, per prompt

(``generate()`` refuses model kwargs it does not know, so the evicted cache reaches evolalloc's
attention function through a context variable instead of the ``evolalloc_cache`` kwarg.)

Greedy only: the first token is the prefill's argmax (sampling it is left to
``evolalloc.generate``). No beam search (the cache cannot be reordered).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.cache_utils import Cache

from evolalloc.runtime.cache import EvictedCache


class GenerateCache(Cache):
    """An ``EvictedCache`` seen by ``generate()``: reports the logical length, forwards updates."""

    is_compileable = False

    def __init__(self, evicted: EvictedCache, logical_length: int):
        super().__init__(layers=[])
        self.evicted = evicted
        self.logical_length = logical_length
        self.appended = 0

    def update(self, key_states, value_states, layer_idx: int, *args, **kwargs):
        if layer_idx == 0:
            self.appended += key_states.shape[2]
        return self.evicted.update(key_states, value_states, layer_idx)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.logical_length + self.appended

    def reorder_cache(self, beam_idx):
        raise NotImplementedError("an evicted cache cannot be reordered: beam search is not supported")


@dataclass
class GenerateInputs:
    """What to pass to ``model.generate(**kwargs)``, and how to read its output back."""

    kwargs: dict
    first_tokens: list[int]
    width: int
    max_new_tokens: int

    def active(self):
        """Context manager: evolalloc's attention uses this evicted cache inside it."""
        from evolalloc.runtime.attention import active_cache

        return active_cache(self.kwargs["past_key_values"].evicted)

    def answers(self, sequences: torch.Tensor) -> list[list[int]]:
        """Per prompt: the first token, then what ``generate()`` added (padding after EOS left in)."""
        return [[first] + row[self.width + 1 :].tolist() for first, row in zip(self.first_tokens, sequences)]


@torch.no_grad()
def generate_inputs(model, tokenizer, prompts, allocation, *, scorer=None, max_new_tokens: int = 32,
                    pad_token_id: int = 0) -> GenerateInputs:
    """Prefill and compress each prompt; left-pad them; return ``generate()``'s inputs.

    The model must use evolalloc's attention (``use_evolalloc_attention``), which reads the
    evicted cache's per-layer slots and validity from the ``evolalloc_cache`` kwarg.
    """
    from evolalloc.runtime.decode import build_cache
    from evolalloc.runtime.generation import resolve_profile
    from evolalloc.runtime.prefill import prefill

    if isinstance(prompts, str):
        prompts = [prompts]
    budgets, scorer, _ = resolve_profile(allocation, model, scorer)
    encoded = [tokenizer.encode(p) for p in prompts]
    records = [prefill(model, ids, [scorer]) for ids in encoded]
    rows, evicted = build_cache(model, [(r, budgets) for r in records], scorer, room=max_new_tokens)
    records = [r for r, _ in rows]
    first = [int(r.first_logits.argmax()) for r in records]
    width = max(len(ids) for ids in encoded)
    device = next(model.parameters()).device  # generate() takes its inputs where the model is
    ids = torch.full((len(encoded), width + 1), pad_token_id, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    for i, (row, token) in enumerate(zip(encoded, first)):
        ids[i, width - len(row) : width] = torch.tensor(row, device=device)
        ids[i, width] = token
        mask[i, width - len(row) :] = 1
    cache = GenerateCache(evicted, logical_length=width)
    kwargs = {"input_ids": ids, "attention_mask": mask, "past_key_values": cache, "pad_token_id": pad_token_id}
    return GenerateInputs(kwargs=kwargs, first_tokens=first, width=width, max_new_tokens=max_new_tokens)
