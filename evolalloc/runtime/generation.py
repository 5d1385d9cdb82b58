"""``evolalloc.generate``: run your own prompts with a budget profile, as a library call.

    import evolalloc
    from evolalloc.runtime.model import load_model

    loaded = load_model("bundled:smollm2-135m-instruct")
    out = evolalloc.generate(loaded.model, loaded.tokenizer, ["...What is the pass key? The pass key is"],
                             "runs/passkey/allocation-c128.json", max_new_tokens=8)
    out.texts[0], out.kv_bytes[0].actual, out.kv_bytes[0].full

It is the evaluation path itself: each prompt is prefilled once with full attention, every
(layer, KV head) keeps the top-``b`` prefix of the scorer's ranking (``runtime.compress``), and the
answer is decoded on the evicted cache from the prompt's original positions
(``runtime.decode``), prompts batched together whatever their lengths. So for the same prompt,
scorer and budgets it returns the tokens ``evolalloc evaluate`` scores.

Budgets are clipped to each prompt's length (a layer cannot keep more tokens than the prompt
has) and to the model's positions; ``GenerationResult.notes`` says so for each prompt where it
happened. With ``question_after_compression=True`` each prompt is a ``(context, question)`` pair:
the context is compressed and the question is fed afterwards (the query-agnostic setting).

``decode=`` holds the budgets while decoding too (``core.decode_eviction.DecodeEviction``, or its
interval): every ``interval`` generated tokens each (layer, KV head) is cut back to its budget
(``runtime/decode_eviction.py``). By default an allocation file's own ``decode`` section decides
(a profile searched with decode-time eviction runs with it); a bare budget array is prompt-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from evolalloc.core.allocation import Allocation
from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.core.errors import UserError
from evolalloc.runtime.compress import validate_budgets
from evolalloc.runtime.decode import DecodeSettings, build_cache, decode_batch, eos_ids_of
from evolalloc.runtime.memory import CacheMemory, cache_memory, reachable_budgets
from evolalloc.runtime.positions import positions_beyond
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.sampling import row_generator
from evolalloc.runtime.scorers import Scorer, get_scorer


@dataclass
class GenerationResult:
    """One entry per prompt, in order.

    ``texts``: the answers (EOS and stop strings cut); ``token_ids``: generated ids (EOS kept);
    ``stopped_by``: "eos", "stop" or "length"; ``prompt_lengths``: tokens prefilled (context
    only when the question is fed after compression); ``budgets``: ``[layers, kv_heads]`` the
    tokens each (layer, head) really kept, after clipping; ``kv_bytes``: the evicted cache vs the
    full cache of that prompt (``CacheMemory``: ``actual``, ``budgeted``, ``full``, ``ratio``);
    ``notes``: what was clipped, per prompt ("" when nothing). ``decode``: the decode-time eviction
    the answers were generated under (``None``: prompt-only; the cache then grew by one token per
    generated token, and ``kv_bytes`` is only its size before decoding).
    """

    texts: list[str]
    token_ids: list[list[int]]
    stopped_by: list[str]
    prompt_lengths: list[int]
    budgets: list[np.ndarray]
    kv_bytes: list[CacheMemory]
    notes: list[str] = field(default_factory=list)
    decode: DecodeEviction | None = None

    @property
    def kv_bytes_kept(self) -> int:
        """Bytes of all prompts' evicted caches (padding included), before decoding."""
        return sum(m.actual for m in self.kv_bytes)

    @property
    def kv_bytes_full(self) -> int:
        """Bytes the same prompts' full caches would take."""
        return sum(m.full for m in self.kv_bytes)


def _geometry(model):
    from evolalloc.runtime.model import geometry_of

    return geometry_of(model.config, next(model.parameters()).dtype)


def resolve_profile(allocation, model, scorer) -> tuple[np.ndarray, Scorer, str]:
    """Budgets ``[layers, kv_heads]``, the scorer, and a note if budgets were clipped to the positions
    (``decode_of`` reads the allocation's decode setting).

    ``allocation``: an ``Allocation``, a path to an allocation file, or a budget array
    (``[layers]`` or ``[layers, kv_heads]``). A profile made for another geometry is a
    ``UserError`` naming both shapes.
    """
    from evolalloc.core.allocation_file import check_geometry, load_allocation

    geometry = _geometry(model)
    if isinstance(allocation, (str, Path)):
        allocation = load_allocation(allocation, expect_geometry=geometry)
    if isinstance(allocation, Allocation):
        check_geometry(allocation, geometry, source=allocation.model)
        budgets = allocation.budgets
        if scorer is None:  # with the adapter it names (AdaKV, the gates, the hybrid), as `evaluate` runs it
            from evolalloc.runtime.adaptive.selection import scorer_for_allocation

            try:
                scorer = scorer_for_allocation(allocation)
            except ValueError as err:
                raise UserError(str(err), field="scorer") from None
    else:
        try:
            budgets = validate_budgets(allocation, geometry.num_layers, geometry.num_kv_heads)
        except ValueError as err:
            raise UserError(str(err), field="allocation") from None
    if scorer is None:
        scorer = get_scorer("snapkv")
    elif isinstance(scorer, str):
        scorer = get_scorer(scorer)
    note = ""
    limit = geometry.max_positions
    if limit and int(budgets.max()) > limit:
        note = f"budgets above the model's {limit} positions clipped to {limit}"
        budgets = np.minimum(budgets, limit)
    try:
        budgets = validate_budgets(budgets, geometry.num_layers, geometry.num_kv_heads, scorer)
    except ValueError as err:
        raise UserError(str(err), field="allocation") from None
    return budgets, scorer, note


def _tokenize(tokenizer, prompt, question_after_compression: bool):
    if not question_after_compression:
        if not isinstance(prompt, str):
            raise UserError(f"expected a prompt string, got {type(prompt).__name__}", field="prompts")
        return tokenizer.encode(prompt), None
    if isinstance(prompt, dict):
        prompt = (prompt.get("context"), prompt.get("question"))
    if not (isinstance(prompt, (tuple, list)) and len(prompt) == 2 and all(isinstance(p, str) for p in prompt)):
        raise UserError("with question_after_compression each prompt is a (context, question) pair", field="prompts")
    context, question = prompt
    question_ids = tokenizer.encode(question, add_special_tokens=False)
    if not question_ids:
        raise UserError("an empty question cannot be fed after compression", field="prompts")
    return tokenizer.encode(context), question_ids


@torch.no_grad()
def generate(
    model,
    tokenizer,
    prompts,
    allocation,
    *,
    scorer: Scorer | str | None = None,
    max_new_tokens: int = 32,
    question_after_compression: bool = False,
    stop: Sequence[str] = (),
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    seed: int = 0,
    batch_size: int = 8,
    decode: DecodeEviction | int | None = None,
) -> GenerationResult:
    """Generate an answer for each prompt with the KV cache evicted to ``allocation``'s budgets.

    ``prompts``: a string or a list of strings (or ``(context, question)`` pairs with
    ``question_after_compression``). ``allocation``: an ``Allocation``, an allocation file path,
    or budgets ``[layers]`` / ``[layers, kv_heads]``. ``scorer``: a ``Scorer`` or a name; default
    the allocation's own scorer (snapkv for a bare array). Greedy unless ``do_sample``; with
    sampling, prompt ``i`` draws from a generator seeded ``seed + i``, so results are
    reproducible and do not depend on ``batch_size``. ``decode``: hold the budgets while decoding, a
    ``DecodeEviction`` or its interval; ``None``: the allocation file's own setting (prompt-only if it
    has none). A scorer that cannot rank generated tokens, or an interval below 1, is a ``UserError``.

    The model is switched to evolalloc's attention for the call and switched back afterwards.
    """
    from evolalloc.runtime.attention import ATTENTION_NAME
    from evolalloc.runtime.model import check_supported, prepare_model

    check_supported(model.config, getattr(model.config, "name_or_path", None) or "the model")
    if isinstance(prompts, (str, tuple, dict)):
        prompts = [prompts]
    prompts = list(prompts)
    _check_settings(max_new_tokens, do_sample, temperature, top_p, top_k)
    if isinstance(allocation, (str, Path)):  # read once, for its budgets and its decode setting
        from evolalloc.core.allocation_file import load_allocation

        allocation = load_allocation(allocation, expect_geometry=_geometry(model))
    budgets, scorer, profile_note = resolve_profile(allocation, model, scorer)
    decode = decode_of(allocation, decode, scorer)
    geometry = _geometry(model)
    encoded = _encode_prompts(tokenizer, prompts, question_after_compression, geometry, max_new_tokens)
    settings = DecodeSettings(max_new_tokens=max_new_tokens, stop=tuple(stop), eos_ids=eos_ids_of(model, tokenizer),
                              do_sample=do_sample, temperature=temperature, top_k=top_k, top_p=top_p)

    previous = model.config._attn_implementation
    if previous != ATTENTION_NAME:
        prepare_model(model, getattr(model.config, "name_or_path", None) or "the model")  # switched and probed
    try:
        generations = []
        room = max_new_tokens + max((len(q) for _, q in encoded if q), default=0)
        for start in range(0, len(encoded), batch_size):
            chunk = encoded[start : start + batch_size]
            records = [prefill(model, ids, [scorer], uid=str(start + j), question_ids=q)
                       for j, (ids, q) in enumerate(chunk)]
            rows, cache = build_cache(model, [(r, budgets) for r in records], scorer, room, decode)
            records = [r for r, _ in rows]
            generators = [row_generator(seed + start + j) for j in range(len(chunk))] if do_sample else None
            generations.extend(decode_batch(model, cache, records, settings, tokenizer, generators=generators))
    finally:
        if previous != ATTENTION_NAME:
            model.set_attn_implementation(previous)

    kept, memory, notes = _per_prompt_budgets(budgets, geometry, encoded, profile_note)
    return GenerationResult(
        texts=[g.text for g in generations],
        token_ids=[g.token_ids for g in generations],
        stopped_by=[g.stopped_by for g in generations],
        prompt_lengths=[len(ids) for ids, _ in encoded],
        budgets=kept,
        kv_bytes=memory,
        notes=notes,
        decode=decode,
    )


def _check_settings(max_new_tokens: int, do_sample: bool, temperature: float, top_p: float, top_k: int) -> None:
    if max_new_tokens < 1:
        raise UserError(f"max_new_tokens must be >= 1, got {max_new_tokens}", field="max_new_tokens")
    if do_sample and not (temperature > 0 and 0 < top_p <= 1 and top_k >= 0):
        raise UserError("sampling needs temperature > 0, 0 < top_p <= 1 "
                        f"and top_k >= 0; got temperature={temperature}, "
                        f"top_p={top_p}, top_k={top_k}", field="sampling")


def decode_of(allocation, decode, scorer: Scorer) -> DecodeEviction | None:
    """The decode-time eviction to run: ``decode`` if given, else the allocation's own; a ``UserError``
    for an interval below 1 or a scorer that cannot rank generated tokens."""
    from evolalloc.runtime.decode_eviction import check_decode_scorer

    try:
        setting = DecodeEviction.of(decode) if decode is not None else getattr(allocation, "decode", None)
        if setting is not None:
            check_decode_scorer(scorer)
    except ValueError as err:
        raise UserError(str(err), field="decode") from None
    return setting


def _encode_prompts(tokenizer, prompts, question_after_compression: bool, geometry, max_new_tokens: int):
    """``[(prompt ids, question ids or None)]``; ``UserError`` for an empty prompt or one whose
    prompt and answer need more positions than the model has."""
    encoded = [_tokenize(tokenizer, p, question_after_compression) for p in prompts]
    for i, (ids, question) in enumerate(encoded):
        if not ids:
            raise UserError(f"prompt {i} is empty", field="prompts")
        needed = positions_beyond(geometry.max_positions, len(ids), len(question or []), max_new_tokens)
        if needed:
            raise UserError(f"prompt {i} needs {needed} positions (prompt + "
                            f"answer), beyond the model's {geometry.max_positions}",
                            field="prompts")
    return encoded


def _per_prompt_budgets(budgets: np.ndarray, geometry, encoded, profile_note: str):
    """Per prompt: the budgets ``[layers, kv_heads]`` its cache really kept (clipped to the prompt
    and to sliding windows), the cache's bytes, and a note saying what was clipped."""
    kept, memory, notes = [], [], []
    for ids, _ in encoded:
        clipped = reachable_budgets(budgets, geometry, len(ids))
        kept.append(clipped)
        memory.append(cache_memory(budgets, geometry, len(ids)))
        parts = [profile_note] if profile_note else []
        if int(budgets.max()) > len(ids):
            parts.append(f"budgets above the prompt's {len(ids)} tokens clipped to {len(ids)}")
        if np.any(clipped < np.minimum(budgets, len(ids))):
            parts.append("sliding-window layers' budgets clipped to their windows")
        notes.append("; ".join(parts))
    return kept, memory, notes
