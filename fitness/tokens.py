"""Token-level helpers: counting in the model's tokens, fitting a generated prompt to a length,
middle truncation, and the two prompt styles (raw completion, the model's chat template).

Only ``tokenizer.encode(text, add_special_tokens=False)``, ``decode`` and ``apply_chat_template``
are used, so any HF tokenizer (or a small stand-in in tests) works.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from fitness.errors import FitnessError

T = TypeVar("T")
PROMPT_STYLES = ("raw", "chat")
LENGTH_TOLERANCE = 0.02  # generated prompts land within ±2% of the requested length


def count_tokens(tokenizer, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False))


def require_tokenizer(tokenizer, task: str) -> None:
    if tokenizer is None:
        raise FitnessError(f"task {task!r} measures lengths in the model's tokens: pass a tokenizer")


def check_max_new_tokens(value) -> int:
    """``value`` if it is a positive integer (an answer's token limit, a task parameter)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise FitnessError(f"max_new_tokens must be a positive integer, got {value!r}")
    return value


def check_prompt_style(style: str) -> str:
    if style not in PROMPT_STYLES:
        raise FitnessError(f"unknown prompt_style {style!r}; valid styles: {', '.join(PROMPT_STYLES)}")
    return style


def render(style: str, tokenizer, body: str, query: str, answer_prefix: str = "") -> tuple[str, str]:
    """Split a prompt into ``(context, question)``.

    raw: ``context = body`` and ``question = query + answer_prefix`` (plain completion, which suits
    small models). chat: the user turn holds ``body + query``; the answer prefix opens the
    assistant turn. Either way the question is the tail of the prompt starting at ``query``, so it
    can be fed after the context has been compressed.
    """
    if style == "raw":
        return body, query + answer_prefix
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": body + query}], tokenize=False, add_generation_prompt=True
    )
    anchor = query if query.strip() else body[-200:]
    at = text.rfind(anchor.strip())
    if at < 0:
        raise FitnessError("the chat template does not reproduce the user message verbatim; use prompt_style='raw'")
    if not query.strip():
        at += len(anchor.strip())
    return text[:at], text[at:] + answer_prefix.lstrip()


def fit_to_length(
    build: Callable[[int], T],
    measure: Callable[[T], int],
    target: int,
    *,
    what: str,
    start: int = 1,
    minimum: int = 0,
) -> T:
    """The ``build(k)`` with the largest ``k >= minimum`` whose ``measure`` is at most ``target``,
    which must be within ``LENGTH_TOLERANCE`` of it. ``measure(build(k))`` must grow with ``k``."""
    if target <= 0:
        raise FitnessError(f"context_tokens must be positive, got {target}")
    lo_item = build(minimum)
    lo_len = measure(lo_item)
    if lo_len > target:
        raise FitnessError(f"{what}: the smallest prompt already has {lo_len} "
                           f"tokens, more than context_tokens={target}")
    lo, hi = minimum, max(start, minimum + 1)
    while measure(build(hi)) <= target:  # grow until the bracket holds the target
        lo, hi = hi, hi * 2
        if hi > 10_000_000:
            raise FitnessError(f"{what}: cannot reach {target} tokens")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if measure(build(mid)) <= target:
            lo = mid
        else:
            hi = mid
    item = build(lo)
    length = measure(item)
    if length < target * (1 - LENGTH_TOLERANCE):
        raise FitnessError(f"{what}: got {length} tokens, not within 2% of context_tokens={target}")
    return item


def render_within(style: str, tokenizer, body: str, query: str, limit: int, *, what: str,
                  answer_prefix: str = "") -> tuple[str, str, bool]:
    """``render`` the prompt, cutting the middle of ``body`` until the whole prompt has at most
    ``limit`` tokens; the query (and answer prefix) is always kept whole.

    Returns ``(context, question, truncated?)``. Token counts are not exactly additive at the seams
    (and a chat template adds its own tokens), so the length is re-checked after each cut.
    """
    truncated = False
    for _ in range(4):
        context, question = render(style, tokenizer, body, query, answer_prefix)
        excess = count_tokens(tokenizer, context + question) - limit
        if excess <= 0:
            return context, question, truncated
        body, truncated = truncate_middle(body, max(1, count_tokens(tokenizer, body) - excess - 2), tokenizer)
    raise FitnessError(f"{what}: cannot fit the prompt into {limit} tokens")


def truncate_middle(text: str, max_tokens: int, tokenizer) -> tuple[str, bool]:
    """Keep the first and last ``max_tokens / 2`` tokens of ``text`` (LongBench's advice: the
    instructions sit at both ends). Returns ``(text, truncated?)``."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) <= max_tokens:
        return text, False
    head = max_tokens // 2
    tail = max_tokens - head
    return tokenizer.decode(ids[:head]) + tokenizer.decode(ids[len(ids) - tail :]), True
