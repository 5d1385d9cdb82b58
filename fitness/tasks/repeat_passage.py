"""Repeat a named passage word for word: a task whose right answer is long.

The prompt holds several short passages of the bundled public-domain prose, each under a name
(``Passage "heron":``), as many as fit in ``context_tokens``; it then asks for one of them and opens
the answer the way the passages were laid out, with the passage's first ``cue_words`` words::

    Repeat passage "heron" word for word.

    Passage "heron":
    It was a grey morning and the

so the answer is the rest of that passage, at least ``passage_tokens`` tokens (it ends at a
sentence end), and the model stops at the end of its line (``stop``). Each split reads only its own
passages of the books (``fitness/tasks/prose.py``).

Why the cue: SmolLM2-135M cannot find a passage by its name alone — with the name only, its full
cache repeated the asked passage on 1 prompt of 5 at ~1k tokens (the first one, each time), and
wrote something else for the others; the opening words let it find the passage and copy on
(``benchmarks/long_output_check.py``; the measured figures are in docs/fitness.md).

The metric is ``token_agreement`` on words, case kept (``fitness/metrics/agreement.py``): the
longest common subsequence of answer and passage over the longer one's length. Why that one: it
credits every word reproduced in order, also after a slip the model recovers from (a prefix match
drops everything after the first wrong word, and a 135M model slips); a skipped or reordered
stretch costs what it misses; stopping early or going on past the passage costs as much as wrong
words, so 1 means the passage exactly. ROUGE-L is the same idea but lower-cases.
``greedy_prefix`` can be named instead.

Default fitness mode: likelihood, the compressed model's mean probability of the rest of the
passage itself, teacher-forced: the answer is known, so the search can climb towards it rather than
towards what the full cache writes (``fidelity`` works too).
"""

from __future__ import annotations

from fitness.errors import FitnessError
from fitness.instance import Instance
from fitness.metrics.agreement import AGREEMENT_METRICS
from fitness.registry import register_task
from fitness.splits import check_split, rng_for
from fitness.task import Task
from fitness.tasks.prose import ProseHaystack
from fitness.tokens import check_max_new_tokens, count_tokens, require_tokenizer

NAMES = ("heron", "maple", "copper", "lantern", "thistle", "falcon", "meadow", "cobalt", "juniper", "pebble",
         "saffron", "willow", "ember", "orchid", "quartz", "raven", "walnut", "harbour", "violet", "badger",
         "cedar", "marble", "otter", "poppy", "canyon", "garnet", "linden", "sparrow", "tulip", "basalt",
         "clover", "fennel")
_APART = 40  # sentences between two passages' starts, more than any passage holds
_TAIL = 200  # sentences at the end of a split's text where no passage starts
HEADER = "Below are some passages, each with a name. You will be asked to repeat one of them word for word.\n\n"


def block(name: str, text: str) -> str:
    return f'Passage "{name}":\n{text}\n\n'


def question(name: str) -> str:
    return f'Repeat passage "{name}" word for word.\n\nPassage "{name}":\n'


@register_task("repeat_passage")
class RepeatPassage(Task):
    metric = "token_agreement"
    default_fitness_mode = "likelihood"
    version = 1
    description = ("named passages of the bundled prose; repeat the one asked for word for word "
                   "(a long answer), token agreement")
    default_context_tokens = 1024
    stop = ("\n",)

    def __init__(self, *, passage_tokens: int = 128, cue_words: int = 8, max_new_tokens: int | None = None,
                 metric: str = "token_agreement"):
        if not isinstance(passage_tokens, int) or isinstance(passage_tokens, bool) or passage_tokens < 8:
            raise FitnessError(f"passage_tokens must be an integer of at least 8, got {passage_tokens!r}")
        self.passage_tokens = passage_tokens
        if not isinstance(cue_words, int) or isinstance(cue_words, bool) or cue_words < 0:
            raise FitnessError(f"cue_words must be an integer of at least 0, got {cue_words!r}")
        self.cue_words = cue_words
        # Whole sentences run past passage_tokens; the stop at the line's end ends a right answer.
        self.max_new_tokens = check_max_new_tokens(max_new_tokens or 2 * self.passage_tokens)
        if metric not in AGREEMENT_METRICS:
            raise FitnessError(f"task 'repeat_passage' metric must be one of {', '.join(AGREEMENT_METRICS)}, "
                               f"got {metric!r}")
        self.metric = metric

    def _passage(self, prose: ProseHaystack, starts: list[int], at: int, tokenizer) -> str:
        """Whole sentences from sentence start ``starts[at]`` until the words after the cue reach
        ``passage_tokens`` tokens."""
        for end in range(at + 1, len(starts)):
            words = prose.pieces(starts[end] - starts[at], starts[at])
            if count_tokens(tokenizer, " ".join(words[self.cue_words:])) >= self.passage_tokens:
                return " ".join(words)
        raise FitnessError("task 'repeat_passage': a passage ran past the end of the prose")

    def instances(self, split: str, n: int, seed: int, context_tokens: int | None, tokenizer) -> list[Instance]:
        check_split(split)
        require_tokenizer(tokenizer, self.name)
        length = int(context_tokens or self.default_context_tokens)
        prose = ProseHaystack(split)
        starts = prose.sentence_starts()
        return [self._instance(split, seed, index, length, prose, starts, tokenizer) for index in range(n)]

    def _cue(self, text: str) -> str:
        return " ".join(text.split(" ")[: self.cue_words])

    def _instance(self, split, seed, index, length, prose, starts, tokenizer) -> Instance:
        rng = rng_for(self.name, split, seed, index)
        names = rng.sample(NAMES, len(NAMES))
        # Checked with the name that tokenizes longest and the longest cue: the prompt fits whichever is asked.
        widest = question(max(NAMES, key=lambda name: count_tokens(tokenizer, question(name))))
        texts: list[str] = []
        taken: list[int] = []
        while True:  # passages while the prompt stays within length
            if len(texts) == len(NAMES):
                raise FitnessError(f"task 'repeat_passage': {length} tokens hold more than {len(NAMES)} passages; "
                                   "raise passage_tokens")
            # A passage starts at least _TAIL sentences before the split's text ends, and may read into
            # them: it never wraps round. (Until 2026-11-30 it could not read into them either, so a start
            # drawn near the end raised "ran past the end"; every prompt built before is built the same.)
            at = rng.randrange(len(starts) - _TAIL)
            if any(abs(at - other) < _APART for other in taken):
                continue  # no two passages share a sentence (nor follow each other in the book)
            text = self._passage(prose, starts, at, tokenizer)
            blocks = "".join(block(name, t) for name, t in zip(names, texts + [text]))
            cue = max((self._cue(t) for t in texts + [text]), key=len)
            if count_tokens(tokenizer, HEADER + blocks + widest + cue) > length:
                break
            texts.append(text)
            taken.append(at)
        if len(texts) < 2:
            raise FitnessError(f"task 'repeat_passage': context_tokens={length} holds fewer than two passages of "
                               f"{self.passage_tokens} tokens")
        asked = rng.randrange(len(texts))
        context = HEADER + "".join(block(name, text) for name, text in zip(names, texts))
        prompt_question = question(names[asked]) + self._cue(texts[asked])
        answer = " ".join(texts[asked].split(" ")[self.cue_words :])
        return Instance(
            uid=f"{self.name}/{split}/{length}/s{seed}/{index}", task=self.name, split=split, context=context,
            question=prompt_question, references=(answer,), max_new_tokens=self.max_new_tokens, stop=self.stop,
            metadata={"asked": names[asked], "position": asked, "passages": len(texts),
                      "answer_tokens": count_tokens(tokenizer, answer),
                      "context_tokens": count_tokens(tokenizer, context + prompt_question)},
        )

    def prepare_prediction(self, instance: Instance, prediction: str) -> str:
        return prediction.strip()
