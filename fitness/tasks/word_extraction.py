"""RULER aggregation tasks: common words extraction (``cwe``) and frequent words extraction (``fwe``).

cwe: a numbered list of words where ``num_common`` words appear ``freq_common`` times and the
others ``freq_uncommon`` times; name the common ones. fwe: a text of made-up "coded" words whose
frequencies follow a Zipf law of exponent ``alpha``; name the three most frequent. The haystack
size is the number of rare-word entries, so the answer stays fixed while the length is fitted.
"""

from __future__ import annotations

import random
import string

from fitness.errors import FitnessError
from fitness.registry import register_task
from fitness.tasks.synthetic import Draft, SyntheticTask
from fitness.tasks.words import word_pool


@register_task("cwe")
class CommonWords(SyntheticTask):
    metric = "string_match_all"
    version = 1
    description = "RULER common words extraction: name the words repeated most in a long numbered list"
    max_new_tokens = 64

    def __init__(self, *, num_common: int = 10, freq_common: int = 10, freq_uncommon: int = 3,
                 prompt_style: str = "raw"):
        super().__init__(prompt_style=prompt_style, depth="even")
        if not freq_common > freq_uncommon >= 1 or num_common < 1:
            raise FitnessError("cwe needs num_common >= 1 and freq_common > freq_uncommon >= 1")
        self.num_common, self.freq_common, self.freq_uncommon = num_common, freq_common, freq_uncommon

    def draft(self, rng) -> Draft:
        seed = rng.getrandbits(32)
        # word_pool's first words do not depend on how many are asked for: the answer is fixed.
        common = tuple(word_pool(self.num_common, random.Random(seed)))
        return Draft(identity="|".join(sorted(common)), references=common, data={"seed": seed})

    def build(self, draft: Draft, size: int, depth: float) -> tuple[str, str, str]:
        # ``size`` counts rare-word entries (each rare word fills up to ``freq_uncommon`` of them),
        # a fine enough step to land within 2% of the requested length.
        rng = random.Random(draft.data["seed"])
        rare_words = -(-size // self.freq_uncommon)
        pool = word_pool(self.num_common + rare_words, rng)
        rare = [w for w in pool[self.num_common :] for _ in range(self.freq_uncommon)][:size]
        items = pool[: self.num_common] * self.freq_common + rare
        rng.shuffle(items)
        listing = " ".join(f"{i}. {w}" for i, w in enumerate(items, 1))
        body = (
            "Below is a numbered list of words. In these words, some appear more often than others. "
            "Memorize the ones that appear most often.\n" + listing + "\n"
        )
        n = self.num_common
        return body, f"Question: What are the {n} most common words in the above list?", (f" Answer: The top {n} words "
                                                                                          "that appear most "
                                                                                          "often in the list are:")


@register_task("fwe")
class FrequentWords(SyntheticTask):
    metric = "string_match_all"
    version = 1
    description = "RULER frequent words extraction: name the 3 most frequent coded words (Zipf law)"
    max_new_tokens = 32
    minimum_size = 0

    def __init__(self, *, alpha: float = 2.0, num_answers: int = 3, prompt_style: str = "raw"):
        super().__init__(prompt_style=prompt_style, depth="even")
        if alpha <= 1.0 or num_answers < 1:
            raise FitnessError("fwe needs alpha > 1 and num_answers >= 1")
        self.alpha, self.num_answers = alpha, num_answers

    @staticmethod
    def _coded_words(seed: int, count: int) -> list[str]:
        """``count`` distinct five-letter nonsense words, the same prefix for any ``count``."""
        rng, words, seen = random.Random(seed), [], set()
        while len(words) < count:
            word = "".join(rng.choice(string.ascii_lowercase) for _ in range(5))
            if word not in seen and not any(word in w or w in word for w in ("there", "again", "words", "coded")):
                seen.add(word)
                words.append(word)
        return words

    def draft(self, rng) -> Draft:
        seed = rng.getrandbits(32)
        answer = tuple(self._coded_words(seed, self.num_answers))
        return Draft(identity="|".join(answer), references=answer, data={"seed": seed})

    def counts(self, size: int) -> list[int]:
        """Word frequencies by rank: a Zipf law scaled so the top word appears ``size`` times,
        with the answer ranks kept strictly apart so the answer is unambiguous."""
        counts = []
        rank = 1
        while True:
            c = int(size * rank ** -self.alpha)
            if c < 1:
                break
            counts.append(c)
            rank += 1
        while len(counts) <= self.num_answers:  # tiny sizes: make room for the answer ranks
            counts.append(1)
        for r in range(self.num_answers, 0, -1):
            counts[r - 1] = max(counts[r - 1], counts[r] + 1)
        return counts

    def build(self, draft: Draft, size: int, depth: float) -> tuple[str, str, str]:
        counts = self.counts(size + 2)
        words = self._coded_words(draft.data["seed"], len(counts))
        items = [w for w, c in zip(words, counts) for _ in range(c)]
        random.Random(draft.data["seed"] + size).shuffle(items)
        body = (
            "Read the following coded text and track the frequency of each coded word. "
            f"Find the {self.num_answers} most frequently appeared coded words.\n" + " ".join(items) + "\n"
        )
        n = self.num_answers
        return (
            body,
            f"Question: What are the {n} most frequently appeared words in the above coded text?",
            f" Answer: According to the coded text above, the {n} most frequently appeared words are:",
        )
