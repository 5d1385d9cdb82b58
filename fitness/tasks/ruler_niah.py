"""RULER's needle-in-a-haystack family (Hsieh et al., 2024), generated locally.

Needles read "One of the special magic numbers for <key> is: <value>." in a haystack of noise
sentences, of the bundled prose (``haystack: prose``) or of a directory's text files. Variants differ
in how many keys, values per key and queried keys there are:

=================  ====  ======  =======  ===================================================
task               keys  values  queried  answer
=================  ====  ======  =======  ===================================================
niah_single           1       1        1  the value
niah_multikey         4       1        1  the queried key's value; other keys are distractors
niah_multivalue       1       4        1  all four values of the key
niah_multiquery       4       1        4  the values of all four keys
=================  ====  ======  =======  ===================================================
"""

from __future__ import annotations

import uuid

from fitness.errors import FitnessError
from fitness.registry import register_task
from fitness.tasks.haystacks import make_haystack
from fitness.tasks.synthetic import Draft, SyntheticTask
from fitness.tasks.words import NOUNS, random_key

NEEDLE_TYPES = {"number": "numbers", "word": "words", "uuid": "uuids"}


class NeedleTask(SyntheticTask):
    """One configurable generator behind the four registered variants."""

    metric = "string_match_all"
    graded_metric = "key_chars"  # characters of each value right in order, averaged over values
    version = 1
    num_keys = 1
    num_values = 1
    num_queries = 1

    def __init__(
        self,
        *,
        needle_type: str = "number",
        haystack: str = "noise",
        haystack_dir: str | None = None,
        prompt_style: str = "raw",
        depth: str = "even",
    ):
        super().__init__(prompt_style=prompt_style, depth=depth)
        if needle_type not in NEEDLE_TYPES:
            raise FitnessError(f"unknown needle_type {needle_type!r}; valid: {', '.join(NEEDLE_TYPES)}")
        self.needle_type = needle_type
        self.haystack = make_haystack(haystack_dir, haystack)

    def _value(self, rng) -> str:
        if self.needle_type == "number":
            return str(rng.randint(1_000_000, 9_999_999))
        if self.needle_type == "word":
            return rng.choice(NOUNS)
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    def draft(self, rng) -> Draft:
        keys: list[str] = []
        while len(keys) < self.num_keys:
            key = random_key(rng)
            if key not in keys and not self.haystack.contains(key):
                keys.append(key)
        values: list[str] = []
        while len(values) < self.num_keys * self.num_values:
            value = self._value(rng)
            # Distinct, and not a substring of another value or of the haystack: the answer must be
            # findable exactly once.
            if not any(value in v or v in value for v in values) and not self.haystack.contains(value):
                values.append(value)
        kind = NEEDLE_TYPES[self.needle_type]
        needles = [
            (keys[i // self.num_values], values[i],
             f"One of the special magic {kind} for {keys[i // self.num_values]} is: {values[i]}.")
            for i in range(len(values))
        ]
        rng.shuffle(needles)  # the queried needle is not always first
        queried = keys[: self.num_queries]
        references = tuple(v for k, v, _ in needles if k in queried)
        if len(needles) > 1:
            if self.depth == "random":
                depths = sorted(rng.random() for _ in needles)
            else:
                depths = [(j + 0.5) / len(needles) for j in range(len(needles))]
        else:
            depths = None  # a single needle follows the instance depth
        offset = self.haystack.draw_offset(rng)
        return Draft(
            identity="|".join(queried) + "=" + "|".join(references),
            references=references,
            unique=tuple(text for _, _, text in needles) + tuple(values),
            data={"keys": queried, "needles": [t for _, _, t in needles], "needle_depths": depths, "offset": offset},
        )

    def new_tokens(self, draft: Draft) -> int:
        per_value = 32 if self.needle_type == "uuid" else 12
        return max(16, per_value * len(draft.references) + 8)

    def build(self, draft: Draft, size: int, depth: float) -> tuple[str, str, str]:
        kind = NEEDLE_TYPES[self.needle_type]
        one = kind[:-1]
        needles = draft.data["needles"]
        depths = draft.data["needle_depths"] or [depth]
        hay = self.haystack.view(draft.split)  # prose: only this split's passages
        text = hay.insert(hay.pieces(size, hay.resolve(draft.data["offset"])), list(zip(depths, needles)))
        header = (f"Some special magic {kind} are hidden within the following text. Make "
                  f"sure to memorize it. I will quiz you about the {kind} afterwards.\n")
        keys = draft.data["keys"]
        about = keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + f", and {keys[-1]}"
        if len(draft.references) == 1:
            query = f"What is the special magic {one} for {about} mentioned in the provided text?"
            prefix = f" The special magic {one} for {about} mentioned in the provided text is"
        else:
            query = f"What are all the special magic {kind} for {about} mentioned in the provided text?"
            prefix = f" The special magic {kind} for {about} mentioned in the provided text are"
        return header + text + "\n", query, prefix


@register_task("niah_single")
class NiahSingle(NeedleTask):
    description = "RULER single needle: one key, one value (number, word or uuid)"
    default_fitness_mode = "likelihood"  # one short exact value right after the answer prefix


@register_task("niah_multikey")
class NiahMultiKey(NeedleTask):
    description = "RULER multi-key: four needles with different keys; answer the queried key's value"
    default_fitness_mode = "likelihood"
    num_keys = 4


@register_task("niah_multivalue")
class NiahMultiValue(NeedleTask):
    description = "RULER multi-value: four needles share one key; answer all four values"
    default_fitness_mode = "graded"  # four values in any order: a teacher-forced order would be arbitrary
    num_values = 4


@register_task("niah_multiquery")
class NiahMultiQuery(NeedleTask):
    description = "RULER multi-query: four keys, each queried; answer all four values"
    default_fitness_mode = "graded"
    num_keys = 4
    num_queries = 4
