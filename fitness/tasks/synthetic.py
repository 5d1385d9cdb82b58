"""The shared machinery of generated long-context tasks (passkey, RULER-style).

A generator first *drafts* an instance (needle values, keys, answer) from a per-instance random
generator, then *builds* the prompt for a haystack size ``k``; ``fit_to_length`` searches ``k`` so
the whole prompt (context + question, in the model's tokens) lands within 2% under the requested
length. The draft's identity (its answer) decides its split, so ``search`` and ``heldout`` never
share an instance for any ``n`` or seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fitness.errors import FitnessError
from fitness.instance import Instance
from fitness.splits import check_split, rng_for, split_of
from fitness.task import Task
from fitness.tokens import check_prompt_style, count_tokens, fit_to_length, render, require_tokenizer

DEPTH_MODES = ("even", "random")
_MAX_DRAWS = 200


@dataclass
class Draft:
    """What a generator decided before the length is fitted."""

    identity: str  # decides the split: equal identities always land in the same split
    references: tuple[str, ...]
    unique: tuple[str, ...] = ()  # texts that must occur exactly once in the prompt (needles)
    data: dict[str, Any] = field(default_factory=dict)  # task-specific; shown as metadata
    split: str = ""  # set once the identity has put the draft in a split (``build`` may read it)


class SyntheticTask(Task):
    """Base of the generated tasks. Subclasses implement ``draft`` and ``build``."""

    metric = "string_match_all"
    max_new_tokens = 32
    stop: tuple[str, ...] = ()
    default_context_tokens = 1024
    minimum_size = 0  # the smallest haystack size ``build`` accepts
    answer_separator = ", "  # between the references in the likelihood continuation

    def reference_continuations(self, instance: Instance) -> tuple[str, ...]:
        """Every reference is needed at once (``string_match_all``): one continuation listing
        them in the instance's order, joined by ``answer_separator``."""
        if len(instance.references) == 1:
            return super().reference_continuations(instance)
        lead = "" if instance.prompt[-1:].isspace() else " "
        return (lead + self.answer_separator.join(ref.strip() for ref in instance.references),)

    def __init__(self, *, prompt_style: str = "raw", depth: str = "even"):
        self.prompt_style = check_prompt_style(prompt_style)
        if depth not in DEPTH_MODES:
            raise FitnessError(f"unknown depth {depth!r}; valid: {', '.join(DEPTH_MODES)}")
        self.depth = depth

    # --- hooks -----------------------------------------------------------------------------
    def draft(self, rng) -> Draft:
        raise NotImplementedError

    def build(self, draft: Draft, size: int, depth: float) -> tuple[str, str, str]:
        """``(body, query, answer_prefix)`` for a haystack of ``size`` units."""
        raise NotImplementedError

    def new_tokens(self, draft: Draft) -> int:
        return self.max_new_tokens

    # --- generation ------------------------------------------------------------------------
    def instance_depth(self, index: int, n: int, rng) -> float:
        """Where the (first) needle goes: spread evenly over the ``n`` instances, or random."""
        if self.depth == "random":
            return rng.random()
        return 0.5 if n == 1 else index / (n - 1)

    def instances(self, split: str, n: int, seed: int, context_tokens: int | None, tokenizer) -> list[Instance]:
        check_split(split)
        require_tokenizer(tokenizer, self.name)
        target = int(context_tokens or self.default_context_tokens)
        out = []
        for index in range(n):
            rng = rng_for(self.name, self.version, split, seed, target, index)
            depth = self.instance_depth(index, n, rng)
            uid = f"{self.name}/{split}/{target}/s{seed}/{index}"
            out.append(self._one(uid, split, rng, depth, target, tokenizer))
        return out

    def _one(self, uid: str, split: str, rng, depth: float, target: int, tokenizer) -> Instance:
        def assemble(draft: Draft, size: int) -> tuple[str, str]:
            body, query, prefix = self.build(draft, size, depth)
            return render(self.prompt_style, tokenizer, body, query, prefix)

        for _ in range(_MAX_DRAWS):
            draft = self.draft(rng)
            if split_of(draft.identity) != split:
                continue  # this answer belongs to the other split
            draft.split = split
            context, question = fit_to_length(
                lambda size: assemble(draft, size),
                lambda parts: count_tokens(tokenizer, parts[0] + parts[1]),
                target,
                what=f"task {self.name!r}",
                start=max(8, target // 8),
                minimum=self.minimum_size,
            )
            prompt = context + question
            # A value that also occurs by chance in the haystack or template would make the answer
            # ambiguous: draw again rather than ship such an instance.
            if all(prompt.count(text) == 1 for text in draft.unique) and all(ref in prompt for ref in draft.references):
                metadata = {"depth": round(depth, 4), "context_tokens": count_tokens(tokenizer, prompt),
                            "target_tokens": target}
                metadata.update(draft.data)
                return Instance(
                    uid=uid,
                    task=self.name,
                    split=split,
                    context=context,
                    question=question,
                    references=draft.references,
                    max_new_tokens=self.new_tokens(draft),
                    stop=self.stop,
                    metadata=metadata,
                )
        raise FitnessError(f"task {self.name!r}: could not draw an unambiguous instance in {_MAX_DRAWS} tries")
