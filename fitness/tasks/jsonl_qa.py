"""Your own questions: one task over a local JSONL file, one record a line,

    {"context": "...", "question": "...", "answers": ["...", ...], "id": "optional"}

scored by any registered metric named in the recipe (``metric: qa_f1``, ``exact_match``,
``string_match_part``...). The file is checked whole before anything runs (``fitness.jsonl``):
the first bad line is one error naming the file, the line and the field.

The prompt is the context, then ``Question: <question>`` and the answer prefix (raw completion),
or the same text as one user turn of the model's chat template (``prompt_style: chat``). The
context is what gets compressed. With ``context_tokens`` set, a longer prompt is cut in the
middle of its context (the question is always kept whole); shorter prompts stay as they are.

Splits: a record belongs to ``search`` or ``heldout`` by a hash of its ``id`` (or, without one,
of its context and question), never by its position (``fitness.splits.partition``): the same
records give the same splits on every machine, in any line order. The split sizes are exact
proportions of the file, so adding lines can move a record that sat at the cut between the two.
"""

from __future__ import annotations

from pathlib import Path

from fitness.errors import FitnessError
from fitness.instance import Instance
from fitness.jsonl import is_string_or_int, is_text, is_text_list, read_jsonl, record_identities
from fitness.metric import get_metric
from fitness.registry import register_task
from fitness.splits import check_split, choose, partition
from fitness.task import Task
from fitness.tokens import (
    check_max_new_tokens,
    check_prompt_style,
    count_tokens,
    render,
    render_within,
    require_tokenizer,
)


@register_task("jsonl_qa")
class JsonlQA(Task):
    metric = "qa_f1"  # the default; the recipe's ``metric`` replaces it
    version = 1
    description = "your questions from a local JSONL file (path=...): context, question, answers; metric=... by name"

    def __init__(
        self,
        *,
        path: str | None = None,
        metric: str = "qa_f1",
        answer_prefix: str = "\nAnswer:",
        max_new_tokens: int = 32,
        heldout_fraction: float = 0.5,
        prompt_style: str = "raw",
    ):
        if path is None:
            raise FitnessError("task 'jsonl_qa' needs path=... (a JSONL file of context, question, answers)")
        self.metric = get_metric(metric).name  # an unknown name raises, with the valid ones
        self.path = str(path)
        self.answer_prefix = answer_prefix
        self.max_new_tokens = check_max_new_tokens(max_new_tokens)
        self.heldout_fraction = heldout_fraction
        self.prompt_style = check_prompt_style(prompt_style)
        self.records = read_jsonl(
            self.path,
            required={"context": is_text, "question": is_text, "answers": is_text_list},
            optional={"id": is_string_or_int},
        )
        self.identities = record_identities(self.records, self.path, ("context", "question"))
        self.split_sizes = tuple(map(len, partition(self.identities, heldout_fraction)))  # checks the fraction too

    def _prompt(self, record: dict, limit: int | None, tokenizer) -> tuple[str, str, bool]:
        body = record["context"].rstrip() + "\n\n"
        query = f"Question: {record['question'].strip()}"
        if limit is None:
            return (*render(self.prompt_style, tokenizer, body, query, self.answer_prefix), False)
        return render_within(self.prompt_style, tokenizer, body, query, limit, what=self.path,
                             answer_prefix=self.answer_prefix)

    def instances(self, split: str, n: int, seed: int, context_tokens: int | None, tokenizer) -> list[Instance]:
        check_split(split)
        require_tokenizer(tokenizer, self.name)
        chosen = choose(self.identities, split, n, seed, self.heldout_fraction, self.path)
        stem = Path(self.path).stem
        out = []
        for index, i in enumerate(chosen):
            line, record = self.records[i]
            context, question, truncated = self._prompt(record, context_tokens, tokenizer)
            out.append(
                Instance(
                    uid=f"{self.name}/{stem}/{split}/{context_tokens or 'own'}/s{seed}/{index}",
                    task=self.name,
                    split=split,
                    context=context,
                    question=question,
                    references=tuple(a.strip() for a in record["answers"]),
                    max_new_tokens=self.max_new_tokens,
                    metadata={
                        "line": line,
                        "id": record.get("id"),
                        "truncated": truncated,
                        "context_tokens": count_tokens(tokenizer, context + question),
                    },
                )
            )
        return out

    def prepare_prediction(self, instance: Instance, prediction: str) -> str:
        """The answer's first non-blank line: a small model often goes on to ask itself more."""
        return next((line for line in prediction.splitlines() if line.strip()), "")

    def describe(self) -> str:
        search, heldout = self.split_sizes
        return (f"{self.name} (v{self.version}, metric {self.metric}): {self.path}, {len(self.records)} records "
                f"({search} search, {heldout} held-out)")
