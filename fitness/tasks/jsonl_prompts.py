"""Your own prompts, no answers: one task over a local JSONL file, one record a line,

    {"id": "optional, unique", "prompt": "..."}

judged against the full cache (``Task.judged_against_full_cache``): the reference of a prompt is
what the uncompressed model itself writes after it, greedily, ``max_new_tokens`` tokens (or up to
its end-of-sequence token). The search climbs the ``fidelity-tokens`` mode (per token, the compressed
model's teacher-forced likelihood of those tokens as a share of the full cache's, capped at 1); the held-out table
scores the compressed model's own greedy answer against them by greedy agreement (``metric``:
``greedy_prefix``, the tokens matched before the first divergence, or ``token_agreement``).

The file is checked whole before anything runs (``fitness.jsonl``): the first bad line is one error
naming the file, the line and the field. A prompt is used as written (raw completion), or as one user
turn of the model's chat template (``prompt_style: chat``); with ``context_tokens`` set, a longer one
loses the middle (``fitness.tokens.truncate_middle``). The whole prompt is the context: there is no
question to feed after compression.

Splits: a record belongs to ``search`` or ``heldout`` by a hash of its ``id`` (or, without one, of its
prompt), never by its position (``fitness.splits.partition``), exactly as ``jsonl_qa``'s records do.
"""

from __future__ import annotations

from pathlib import Path

from fitness.errors import FitnessError
from fitness.instance import Instance
from fitness.jsonl import is_string_or_int, is_text, read_jsonl, record_identities
from fitness.metrics.agreement import check_agreement_metric
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


@register_task("jsonl_prompts")
class JsonlPrompts(Task):
    metric = "greedy_prefix"  # the default; the recipe's ``metric`` replaces it
    graded_metric = "token_agreement"
    default_fitness_mode = "fidelity-tokens"
    judged_against_full_cache = True
    version = 1
    description = ("your prompts from a local JSONL file (path=...), no answers: "
                   "judged against the full cache's own continuation")

    def __init__(self, *, path: str | None = None, metric: str = "greedy_prefix", max_new_tokens: int = 64,
                 heldout_fraction: float = 0.5, prompt_style: str = "raw"):
        if path is None:
            raise FitnessError("task 'jsonl_prompts' needs path=... (a JSONL file of {\"id\": ..., \"prompt\": ...})")
        self.metric = check_agreement_metric(metric, "jsonl_prompts")
        self.max_new_tokens = check_max_new_tokens(max_new_tokens)
        self.path = str(path)
        self.heldout_fraction = heldout_fraction
        self.prompt_style = check_prompt_style(prompt_style)
        self.records = read_jsonl(self.path, required={"prompt": is_text}, optional={"id": is_string_or_int})
        self.identities = record_identities(self.records, self.path, ("prompt",))
        self.split_sizes = tuple(map(len, partition(self.identities, heldout_fraction)))  # checks the fraction too

    def _prompt(self, record: dict, limit: int | None, tokenizer) -> tuple[str, str, bool]:
        if limit is None:
            return (*render(self.prompt_style, tokenizer, record["prompt"], ""), False)
        return render_within(self.prompt_style, tokenizer, record["prompt"], "", limit, what=self.path)

    def instances(self, split: str, n: int, seed: int, context_tokens: int | None, tokenizer) -> list[Instance]:
        check_split(split)
        require_tokenizer(tokenizer, self.name)
        chosen = choose(self.identities, split, n, seed, self.heldout_fraction, self.path)
        stem = Path(self.path).stem
        out = []
        for index, i in enumerate(chosen):
            line, record = self.records[i]
            context, question, truncated = self._prompt(record, context_tokens, tokenizer)
            out.append(Instance(
                uid=f"{self.name}/{stem}/{split}/{context_tokens or 'own'}/s{seed}/{index}",
                task=self.name, split=split, context=context, question=question, references=(),
                max_new_tokens=self.max_new_tokens,
                metadata={"line": line, "id": record.get("id"), "truncated": truncated,
                          "context_tokens": count_tokens(tokenizer, context + question)},
            ))
        return out

    def describe(self) -> str:
        search, heldout = self.split_sizes
        return (f"{self.name} (v{self.version}, metric {self.metric}): {self.path}, {len(self.records)} prompts "
                f"({search} search, {heldout} held-out), judged against the full cache's {self.max_new_tokens} tokens")
