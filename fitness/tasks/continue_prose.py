"""Prose to continue: a long output with no answer of its own.

The prompt is a stretch of the bundled public-domain books (``fitness/data/prose``), about
``context_tokens`` tokens from a sentence start, read from its split's passages only
(``fitness/tasks/prose.py``: a held-out prompt holds only held-out text, which the search never
read); the model continues it for ``max_new_tokens`` tokens (128 by default). Like ``jsonl_prompts``
it is judged against the full cache (``Task.judged_against_full_cache``): the search climbs the
``fidelity-tokens`` mode (results/decode-fidelity chose it), the held-out table scores the greedy
continuation by greedy agreement with the full cache's own.

The instances of a split start at distinct sentences drawn per instance (``fitness.splits.rng_for``),
so the same arguments give the same prompts on every machine.
"""

from __future__ import annotations

from fitness.errors import FitnessError
from fitness.instance import Instance
from fitness.metrics.agreement import check_agreement_metric
from fitness.registry import register_task
from fitness.splits import check_split, rng_for
from fitness.task import Task
from fitness.tasks.prose import ProseHaystack
from fitness.tokens import check_max_new_tokens, count_tokens, fit_to_length, require_tokenizer

_MAX_DRAWS = 50  # redraws for a start another instance already took


@register_task("continue_prose")
class ContinueProse(Task):
    metric = "greedy_prefix"  # the default; the recipe's ``metric`` replaces it
    graded_metric = "token_agreement"
    default_fitness_mode = "fidelity-tokens"
    judged_against_full_cache = True
    version = 1
    description = ("bundled public-domain prose (each split its own passages) continued for max_new_tokens "
                   "tokens; judged against the full cache's own continuation")
    default_context_tokens = 1024

    def __init__(self, *, max_new_tokens: int = 128, metric: str = "greedy_prefix"):
        self.max_new_tokens = check_max_new_tokens(max_new_tokens)
        self.metric = check_agreement_metric(metric, "continue_prose")

    def instances(self, split: str, n: int, seed: int, context_tokens: int | None, tokenizer) -> list[Instance]:
        check_split(split)
        require_tokenizer(tokenizer, self.name)
        length = int(context_tokens or self.default_context_tokens)
        prose = ProseHaystack(split)
        starts = prose.sentence_starts()
        taken: set[int] = set()
        out = []
        for index in range(n):
            rng = rng_for(self.name, split, seed, index)
            offset = next((o for o in (rng.choice(starts) for _ in range(_MAX_DRAWS)) if o not in taken), None)
            if offset is None:
                raise FitnessError(f"task 'continue_prose': too few sentences in the {split} passages for {n} prompts")
            taken.add(offset)
            words, text = fit_to_length(
                lambda k: (k, " ".join(prose.pieces(k, offset))),
                lambda built: count_tokens(tokenizer, built[1]),
                length,
                what="task 'continue_prose'",
                start=max(8, length // 2),
            )
            out.append(Instance(
                uid=f"{self.name}/{split}/{length}/s{seed}/{index}", task=self.name, split=split, context=text,
                question="", references=(), max_new_tokens=self.max_new_tokens,
                metadata={"offset": offset, "passages": prose.passages_at(offset, words),
                          "context_tokens": count_tokens(tokenizer, text)},
            ))
        return out
