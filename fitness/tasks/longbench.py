"""LongBench (Bai et al., 2023) from local JSONL files in the official format
(``input``, ``context``, ``answers``, ``all_classes``, ``length``, ``dataset``, ``_id``).

Prompts, generation lengths and metrics are LongBench's own (``longbench_config.py``). The prompt
is split at the end of the document: the context is the instruction plus the document, the
question is the rest of the template (question and answer cue). When the prompt exceeds the
window, the context is truncated in the middle (LongBench's advice: instructions sit at both
ends), so the question is always kept whole.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Mapping

from fitness.errors import FitnessDataError, FitnessError
from fitness.instance import Instance
from fitness.jsonl import is_int, is_string, is_string_list, read_jsonl
from fitness.registry import register_task
from fitness.splits import check_split, choose
from fitness.task import Task
from fitness.tasks.longbench_config import FIRST_LINE_ONLY, NO_CHAT_TEMPLATE, SUBSETS, canonical_subset
from fitness.tokens import check_prompt_style, count_tokens, render_within, require_tokenizer

_PARAGRAPH = re.compile(r"Paragraph \d+")


@register_task("longbench")
class LongBench(Task):
    version = 1
    description = "LongBench English subsets from local JSONL (subset=..., data_file=... or data_dir=...)"
    metric = "qa_f1"  # replaced by the subset's metric

    def __init__(
        self,
        *,
        subset: str | None = None,
        data_file: str | None = None,
        data_dir: str | None = None,
        max_length: int = 7500,
        heldout_fraction: float = 0.5,
        prompt_style: str = "raw",
    ):
        self.prompt_style = check_prompt_style(prompt_style)
        self.max_length = max_length
        self.heldout_fraction = heldout_fraction
        if subset is not None:
            found = canonical_subset(subset)
            if found is None:
                raise FitnessError(f"unknown LongBench subset {subset!r}; valid subsets: {', '.join(SUBSETS)}")
            subset = found
        if data_file is None:
            if data_dir is None or subset is None:
                raise FitnessError("task 'longbench' needs data_file, or data_dir "
                                   "with subset (reads <data_dir>/<subset>.jsonl)")
            data_file = str(Path(data_dir) / f"{subset}.jsonl")
        self.data_file = str(data_file)
        if subset is None:
            subset = canonical_subset(Path(self.data_file).stem.removesuffix("_e"))
        self.records = self._load()
        self.subset = subset or self._subset_from_records()
        self.config = SUBSETS[self.subset]
        self.metric = self.config.metric
        self._check_subset_fields()

    # --- loading ---------------------------------------------------------------------------
    def _load(self) -> list[tuple[int, dict]]:
        return read_jsonl(
            self.data_file,
            required={"input": is_string, "context": is_string, "answers": is_string_list},
            optional={"all_classes": is_string_list, "length": is_int, "dataset": is_string, "_id": is_string},
        )

    def _subset_from_records(self) -> str:
        line, record = self.records[0]
        name = record.get("dataset")
        if name is None:
            raise FitnessDataError(
                "absent, and the file name does not name a subset: pass subset=...", file=self.data_file, line=line,
                                   field="dataset"
            )
        found = canonical_subset(name)
        if found is None:
            raise FitnessDataError(f"unknown LongBench subset {name!r}; valid subsets: {', '.join(SUBSETS)}",
                                   file=self.data_file, line=line, field="dataset")
        return found

    def _check_subset_fields(self) -> None:
        """The file must belong to the subset, and hold what the subset's metric needs."""
        for line, record in self.records:
            where = {"file": self.data_file, "line": line}
            name = record.get("dataset")
            if name is not None and canonical_subset(name.removesuffix("_e")) != self.subset:
                raise FitnessDataError(f"{name!r} but the task reads subset {self.subset!r}", field="dataset", **where)
            if self.metric == "classification" and not record.get("all_classes"):
                raise FitnessDataError("missing: classification needs the list of classes", field="all_classes",
                                       **where)
            if self.metric == "retrieval" and not all(_PARAGRAPH.search(a) for a in record["answers"]):
                raise FitnessDataError('each answer must name a "Paragraph N"', field="answers", **where)

    # --- instances -------------------------------------------------------------------------
    def _identity(self, record: dict) -> str:
        if record.get("_id"):
            return record["_id"]
        return hashlib.sha256((record["input"] + "\x1f" + record["context"]).encode("utf-8")).hexdigest()

    def _parts(self, record: dict) -> tuple[str, str]:
        head, tail = self.config.template.split("{context}")
        return head + record["context"], tail.replace("{input}", record["input"])

    def _fit(self, record: dict, limit: int, tokenizer) -> tuple[str, str, bool]:
        style = "raw" if self.subset in NO_CHAT_TEMPLATE else self.prompt_style
        body, query = self._parts(record)
        return render_within(style, tokenizer, body, query, limit, what=f"{self.data_file} ({self.subset})")

    def instances(self, split: str, n: int, seed: int, context_tokens: int | None, tokenizer) -> list[Instance]:
        check_split(split)
        require_tokenizer(tokenizer, self.name)
        limit = int(context_tokens or self.max_length)
        records = [r for _, r in self.records]
        lines = [line for line, _ in self.records]
        chosen = choose([self._identity(r) for r in records], split, n, seed, self.heldout_fraction, self.data_file)
        out = []
        for index, i in enumerate(chosen):
            record = records[i]
            context, question, truncated = self._fit(record, limit, tokenizer)
            out.append(
                Instance(
                    uid=f"longbench/{self.subset}/{split}/{limit}/s{seed}/{index}",
                    task=self.name,
                    split=split,
                    context=context,
                    question=question,
                    references=tuple(record["answers"]),
                    max_new_tokens=self.config.max_new_tokens,
                    metadata={
                        "subset": self.subset,
                        "line": lines[i],
                        "id": record.get("_id"),
                        "all_classes": tuple(record.get("all_classes") or ()),
                        "length": record.get("length"),
                        "truncated": truncated,
                        "context_tokens": count_tokens(tokenizer, context + question),
                    },
                )
            )
        return out

    # --- scoring ---------------------------------------------------------------------------
    def prepare_prediction(self, instance: Instance, prediction: str) -> str:
        if self.subset in FIRST_LINE_ONLY:
            return prediction.lstrip("\n").split("\n")[0]
        return prediction

    def metric_extra(self, instance: Instance) -> Mapping[str, Any]:
        return {"all_classes": instance.metadata["all_classes"]} if self.metric == "classification" else {}

    def describe(self) -> str:
        return f"longbench/{self.subset} (v{self.version}, metric {self.metric}): {self.description}"
