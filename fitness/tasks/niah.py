"""Needle in a haystack (Kamradt style): a needle sentence hidden in the ``.txt`` files of a
directory (``haystack_dir``) or in the bundled public-domain prose (``haystack: prose``), a
retrieval question, keyword-recall scoring, and a grid of depths x lengths for a heat-map (each
instance's metadata holds its ``depth`` and ``target_tokens``).

With a directory, search and held-out instances start the haystack at different sentences (even /
odd sentence starts of the corpus), so the two splits never share a prompt. With the prose, each
split reads only its own passages, so held-out text is never seen by the search.
"""

from __future__ import annotations

from typing import Sequence

from fitness.errors import FitnessError
from fitness.instance import Instance
from fitness.registry import get_metric, register_task
from fitness.splits import check_split, rng_for
from fitness.task import Task
from fitness.tasks.haystacks import make_haystack
from fitness.tokens import check_prompt_style, count_tokens, fit_to_length, render, require_tokenizer

DEFAULT_NEEDLE = "The best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day."
DEFAULT_QUESTION = "What is the best thing to do in San Francisco?"
DEFAULT_KEYWORDS = ("sandwich", "Dolores Park", "sunny day")
DEFAULT_DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


@register_task("niah")
class Niah(Task):
    metric = "keyword_recall"  # configurable: any registered metric
    version = 1
    description = ("needle in a haystack of your own .txt files or the "
                   "bundled prose; depths x lengths grid, keyword recall")

    def __init__(
        self,
        *,
        haystack_dir: str | None = None,
        haystack: str | None = None,
        needle: str = DEFAULT_NEEDLE,
        question: str = DEFAULT_QUESTION,
        keywords: Sequence[str] | str | None = None,
        answer_prefix: str = " Answer:",
        depths: Sequence[float] = DEFAULT_DEPTHS,
        lengths: Sequence[int] = (1024,),
        metric: str = "keyword_recall",
        max_new_tokens: int = 32,
        prompt_style: str = "raw",
    ):
        if not haystack_dir and haystack != "prose":
            raise FitnessError("task 'niah' needs haystack_dir (a directory of .txt files) or haystack: prose")
        if keywords is None:
            if needle != DEFAULT_NEEDLE:
                raise FitnessError("task 'niah' with a custom needle needs keywords (the words an answer must contain)")
            keywords = DEFAULT_KEYWORDS
        if isinstance(keywords, str):
            keywords = [k.strip() for k in keywords.split(",")]
        self.keywords = tuple(k for k in keywords if k)
        if not self.keywords:
            raise FitnessError("task 'niah' needs at least one keyword")
        if not depths or any(not 0.0 <= d <= 1.0 for d in depths):
            raise FitnessError(f"niah depths must lie in [0, 1], got {list(depths)}")
        self.haystack = make_haystack(haystack_dir, haystack or "noise")
        if self.haystack.contains(needle):
            raise FitnessError("the needle already occurs in the haystack text; choose another needle")
        self.needle, self.question, self.answer_prefix = needle, question, answer_prefix
        self.depths, self.lengths = tuple(depths), tuple(int(x) for x in lengths)
        self.metric = get_metric(metric).name
        self.max_new_tokens = max_new_tokens
        self.prompt_style = check_prompt_style(prompt_style)

    def reference_continuations(self, instance: Instance) -> tuple[str, ...]:
        """The needle sentence itself (what a retrieving model restates after "Answer:").

        The default mode stays ``generate``: keyword recall is already graded, and a free-text
        answer has many phrasings that a single teacher-forced continuation would not credit."""
        lead = "" if instance.prompt[-1:].isspace() else " "
        return (lead + self.needle,)

    def grid(self, context_tokens: int | None = None) -> list[tuple[int, float]]:
        """The (length, depth) cells, in the order instances cycle through them."""
        lengths = (int(context_tokens),) if context_tokens else self.lengths
        return [(length, depth) for length in lengths for depth in self.depths]

    def instances(self, split: str, n: int, seed: int, context_tokens: int | None, tokenizer) -> list[Instance]:
        check_split(split)
        require_tokenizer(tokenizer, self.name)
        hay = self.haystack.view(split)
        if hay is self.haystack:  # one text for both splits: they start at alternate sentences
            starts = hay.sentence_starts()[(0 if split == "search" else 1) :: 2]
        else:  # the prose: this split's passages only
            starts = hay.sentence_starts()
        if not starts:
            raise FitnessError(f"the haystack has too few sentences for a {split} split")
        cells = self.grid(context_tokens)
        out = []
        for index in range(n):
            length, depth = cells[index % len(cells)]
            offset = rng_for(self.name, split, seed, index).choice(starts)

            def assemble(size: int) -> tuple[str, str]:
                text = hay.insert(hay.pieces(size, offset), [(depth, self.needle)])
                return render(self.prompt_style, tokenizer, text + "\n", f"Question: {self.question}",
                              self.answer_prefix)

            context, question = fit_to_length(
                assemble,
                lambda parts: count_tokens(tokenizer, parts[0] + parts[1]),
                length,
                what="task 'niah'",
                start=max(8, length // 4),
            )
            out.append(
                Instance(
                    uid=f"{self.name}/{split}/{length}/s{seed}/{index}",
                    task=self.name,
                    split=split,
                    context=context,
                    question=question,
                    references=self.keywords,
                    max_new_tokens=self.max_new_tokens,
                    metadata={
                        "depth": depth,
                        "target_tokens": length,
                        "context_tokens": count_tokens(tokenizer, context + question),
                        "offset": offset,
                    },
                )
            )
        return out
