"""Passkey retrieval (Mohtashami & Jaggi, 2023): a 5-digit key hidden in repeated filler.

The raw prompt ends exactly "What is the pass key? The pass key is"; that ending is the question
part, so it can be fed after the context has been compressed.
"""

from __future__ import annotations

from fitness.registry import register_task
from fitness.tasks.haystack import NoiseHaystack
from fitness.tasks.synthetic import Draft, SyntheticTask

HEADER = (
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
    "I will quiz you about the important information there.\n"
)


@register_task("passkey")
class Passkey(SyntheticTask):
    metric = "string_match_all"  # one reference: 1 when the key's digits occur in the answer
    graded_metric = "key_chars"  # digits right in order
    default_fitness_mode = "likelihood"  # continuation " 12345": a space token, then one token per digit
    version = 1
    description = "5-digit pass key hidden in repeated filler sentences; answer the key"
    max_new_tokens = 8
    stop = ("\n",)

    def __init__(self, *, prompt_style: str = "raw", depth: str = "even"):
        super().__init__(prompt_style=prompt_style, depth=depth)
        self.haystack = NoiseHaystack()

    def draft(self, rng) -> Draft:
        key = str(rng.randint(10000, 99999))
        needle = f"The pass key is {key}. Remember it. {key} is the pass key."
        return Draft(identity=key, references=(key,), unique=(needle,), data={"needle": needle})

    def build(self, draft: Draft, size: int, depth: float) -> tuple[str, str, str]:
        text = self.haystack.insert(self.haystack.pieces(size), [(depth, draft.data["needle"])])
        return HEADER + text + "\n", "What is the pass key?", " The pass key is"
