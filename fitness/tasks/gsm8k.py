"""GSM8K (Cobbe et al., 2021) from a local JSONL file (``question``, ``answer`` ending "#### N"),
with the 8-shot chain-of-thought prompt of Wei et al. (2022) and final-number accuracy.

The exemplars are the context (what gets compressed); the test question is the question part.
"""

from __future__ import annotations

import re

from fitness.errors import FitnessDataError, FitnessError
from fitness.instance import Instance
from fitness.jsonl import is_string, read_jsonl
from fitness.registry import register_task
from fitness.splits import check_split, choose
from fitness.task import Task
from fitness.tokens import check_prompt_style, count_tokens, render, require_tokenizer

# Wei et al. (2022), "Chain-of-thought prompting elicits reasoning", the GSM8K exemplars.
EXEMPLARS = (
    (
        "There are 15 trees in the grove. Grove workers will plant trees in the grove today. After they are done, "
        "there will be 21 trees. How many trees did the grove workers plant today?",
        "There are 15 trees originally. Then there were 21 trees after some more were planted. "
        "So there must have been 21 - 15 = 6. The answer is 6.",
    ),
    (
        "If there are 3 cars in the parking lot and 2 more cars arrive, how many cars are in the parking lot?",
        "There are originally 3 cars. 2 more cars arrive. 3 + 2 = 5. The answer is 5.",
    ),
    (
        "Leah had 32 chocolates and her sister had 42. If they ate 35, how many pieces do they have left in total?",
        "Originally, Leah had 32 chocolates. Her sister had 42. So in total they had 32 + 42 = 74. "
        "After eating 35, they had 74 - 35 = 39. The answer is 39.",
    ),
    (
        "Jason had 20 lollipops. He gave Denny some lollipops. Now Jason has 12 lollipops. "
        "How many lollipops did Jason give to Denny?",
        "Jason started with 20 lollipops. Then he had 12 after giving some to Denny. So he gave Denny 20 - 12 = 8. "
        "The answer is 8.",
    ),
    (
        "Shawn has five toys. For Christmas, he got two toys each "
        "from his mom and dad. How many toys does he have now?",
        "Shawn started with 5 toys. If he got 2 toys each from his mom and dad, then that is 4 more toys. "
        "5 + 4 = 9. The answer is 9.",
    ),
    (
        "There were nine computers in the server room. Five more computers were installed each day, from monday to "
        "thursday. How many computers are now in the server room?",
        "There were originally 9 computers. For each of 4 days, 5 more computers were added. "
        "So 5 * 4 = 20 computers were added. 9 + 20 is 29. The answer is 29.",
    ),
    (
        "Michael had 58 golf balls. On tuesday, he lost 23 golf balls. On wednesday, he lost 2 more. "
        "How many golf balls did he have at the end of wednesday?",
        "Michael started with 58 golf balls. After losing 23 on tuesday, he had 58 - 23 = 35. "
        "After losing 2 more, he had 35 - 2 = 33 golf balls. The answer is 33.",
    ),
    (
        "Olivia has $23. She bought five bagels for $3 each. How much money does she have left?",
        "Olivia had 23 dollars. 5 bagels for 3 dollars each will be 5 x 3 = 15 dollars. "
        "So she has 23 - 15 dollars left. 23 - 15 is 8. The answer is 8.",
    ),
)
_FINAL = re.compile(r"####\s*(-?[\d,]*\.?\d+)\s*$")


@register_task("gsm8k")
class GSM8K(Task):
    metric = "numeric_match"
    version = 1
    description = "GSM8K grade-school math from local JSONL; 8-shot chain of thought, final-number accuracy"

    def __init__(
        self,
        *,
        data_file: str | None = None,
        num_shots: int = 8,
        max_new_tokens: int = 256,
        heldout_fraction: float = 0.5,
        prompt_style: str = "raw",
    ):
        if not data_file:
            raise FitnessError("task 'gsm8k' needs data_file: a JSONL file with 'question' and 'answer'")
        if not 0 <= num_shots <= len(EXEMPLARS):
            raise FitnessError(f"num_shots must be between 0 and {len(EXEMPLARS)}, got {num_shots}")
        self.data_file = str(data_file)
        self.num_shots, self.max_new_tokens = num_shots, max_new_tokens
        self.heldout_fraction = heldout_fraction
        self.prompt_style = check_prompt_style(prompt_style)
        self.records = []
        for line, record in read_jsonl(self.data_file, required={"question": is_string, "answer": is_string}):
            found = _FINAL.search(record["answer"].strip())
            if not found:
                raise FitnessDataError('must end with "#### <number>"', file=self.data_file, line=line, field="answer")
            self.records.append((line, record["question"], found.group(1).replace(",", "")))

    reference_continuation = False  # see reference_continuations

    def reference_continuations(self, instance: Instance) -> tuple[str, ...]:
        raise FitnessError("task 'gsm8k' has no reference continuation: the answer number comes after a "
                           "chain of thought; use fitness mode 'generate'")

    def instances(self, split: str, n: int, seed: int, context_tokens: int | None, tokenizer) -> list[Instance]:
        check_split(split)
        if self.prompt_style == "chat":
            require_tokenizer(tokenizer, self.name)  # the template comes from the tokenizer
        shots = "".join(f"Q: {q}\nA: {a}\n\n" for q, a in EXEMPLARS[: self.num_shots])
        chosen = choose([q for _, q, _ in self.records], split, n, seed, self.heldout_fraction, self.data_file)
        out = []
        for index, i in enumerate(chosen):
            line, question, answer = self.records[i]
            context, query = render(self.prompt_style, tokenizer, shots, f"Q: {question}\nA:")
            metadata = {"line": line, "num_shots": self.num_shots}
            if tokenizer is not None:
                metadata["context_tokens"] = count_tokens(tokenizer, context + query)
            out.append(
                Instance(
                    uid=f"gsm8k/{split}/s{seed}/{index}",
                    task=self.name,
                    split=split,
                    context=context,
                    question=query,
                    references=(answer,),
                    max_new_tokens=self.max_new_tokens,
                    stop=("\n\n", "\nQ:"),
                    metadata=metadata,
                )
            )
        return out
