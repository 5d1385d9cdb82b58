"""Training a run's scorer (gates, or the learned policy) from its own search instances: traces,
then training, resumable after a kill.

``train_in_run`` is what ``scorer.train`` in a recipe asks for (``pipeline.scorer_training``
decides which instances and where). Everything lives in one folder keyed by content:

    traces/trace-NNNNN.pt   one per instance, each written atomically (a kill loses at most one)
    traces/index.json       model identity, geometry, the instances' uids and tasks
    train-state.pt          the training state every ``checkpoint_every`` steps (atomic)
    train.log.jsonl         the training log
    gates.pt / policy.pt    the finished checkpoint (atomic); once it exists the folder is done

A rerun of a killed step re-uses the traces already written and continues training from the last
state; the split points of a trace come from a generator seeded per (seed, trace index), and the
training draws are fixed up front (``train_gates``), so the result equals an uninterrupted run.
Once ``gates.pt`` is written, the trace tensors are deleted (tens of MB each at 1k tokens); the
index stays as the record of what was trained on.
"""

from __future__ import annotations

import io
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from evolalloc.core.fileio import write_atomic
from evolalloc.core.phases import announce
from evolalloc.learned.answer_train import answer_target
from evolalloc.learned.gates_train import GatesTrainConfig, train_gates
from evolalloc.learned.settings import TraceSettings, TrainConfig
from evolalloc.learned.traces import FORMAT, VERSION, load_traces, pick_splits, trace_ids
from evolalloc.learned.train import train as train_policy
from evolalloc.runtime.gates import save_gates
from evolalloc.runtime.policy import save_policy

#: The finished checkpoint's file name in the folder, per trainable scorer's checkpoint kind
#: (``Scorer.checkpoint_kind``: the ``retention-gates`` scorer's is ``gates``).
CHECKPOINTS = {"gates": "gates.pt", "learned": "policy.pt"}
STATE = "train-state.pt"


@dataclass(frozen=True)
class InRunSettings:
    """The recipe's ``scorer.train`` resolved (capacities and hidden filled in) plus the scorer's
    sinks and window. ``horizon``, ``capacities``: gates only; ``depth``, ``permutations``,
    ``max_tokens``: the learned policy only."""

    scorer: str  # the checkpoint kind: "gates" (the retention-gates scorer) or "learned"
    steps: int
    seed: int
    future: int
    splits_per_trace: int
    min_split: int
    hidden: int
    horizon: int
    capacities: tuple[int, ...]
    checkpoint_every: int
    sinks: int
    window: int
    depth: int = 2
    permutations: int = 16
    max_tokens: int | None = None
    votes: int = 0  # gates only: query-aware gates reading SnapKV votes of this window
    anchored: bool = False  # gates only: anchored at SnapKV's vote (runtime.gates; needs votes)
    residual: bool = True  # anchored gates only: False trains the per-head scale and offset alone
    objective: str = "attention"  # anchored gates only: "answer" trains on the answer's NLL (learned.answer_train)
    temperature: float = 1.0  # answer objective: the soft top-k's tau
    uniform_too: bool = False  # answer objective: also the per-head soft top-k
    answer_tokens: int = 24  # answer objective: longest full-cache answer taken as the target

    def key_fields(self) -> dict:
        """What the trained weights depend on (``checkpoint_every`` does not: resuming is exact).
        ``votes`` and ``anchored`` only when set, and the answer objective's fields only with it, so
        earlier gates keep the keys (and cached weights) they had."""
        fields = asdict(self)
        fields.pop("checkpoint_every")
        if fields["objective"] == "attention":
            for answer_only in ("objective", "temperature", "uniform_too", "answer_tokens"):
                fields.pop(answer_only)
        for optional in ("votes", "anchored"):
            if not fields[optional]:
                fields.pop(optional)
        if fields["residual"]:
            fields.pop("residual")
        return fields


def train_in_run(loaded, identity: dict, instances: list[tuple[str, object]], settings: InRunSettings, folder: Path,
                 *, provenance: dict, progress: bool = True) -> Path:
    """Trace ``instances`` (``(task label, instance)``) and train ``settings.scorer`` on them in
    ``folder``; the checkpoint's path. Re-uses a finished checkpoint; continues a killed step."""
    final = folder / CHECKPOINTS[settings.scorer]
    if final.is_file():
        return final
    traces_dir = folder / "traces"
    trace_settings = TraceSettings(tasks=tuple(dict.fromkeys(task for task, _ in instances)), count=len(instances),
                                   split="search", seed=settings.seed, future=settings.future,
                                   splits_per_trace=settings.splits_per_trace, min_split=settings.min_split,
                                   votes=settings.votes)
    entries = []
    for i, (task, inst) in enumerate(tqdm(instances, desc="trace search split", unit="prompt", disable=not progress)):
        announce("tracing", i, len(instances))
        name = f"trace-{i:05d}.pt"
        prompt = loaded.tokenizer.encode(inst.prompt)
        answer = loaded.tokenizer.encode(inst.references[0], add_special_tokens=False) if inst.references else []
        ids = prompt + answer
        # One generator per trace: a resumed step draws the same split points for the traces it still makes.
        splits = pick_splits(len(ids), len(prompt), trace_settings, random.Random(f"{settings.seed}:{i}"))
        entries.append({"file": name, "uid": inst.uid, "task": task, "length": len(ids), "splits": splits})
        if (traces_dir / name).is_file():
            continue
        record = trace_ids(loaded.model, ids, splits, settings.future, settings.votes)
        record.update(format=FORMAT, version=VERSION, uid=inst.uid, task=task, prompt_len=len(prompt))
        if settings.objective == "answer":  # what the full cache answers: the target (learned.answer_train)
            record["answer_target"] = answer_target(loaded.model, loaded.tokenizer, record, len(prompt),
                                                    inst.references,
                                                    settings.answer_tokens)
        buffer = io.BytesIO()
        torch.save(record, buffer)
        write_atomic(traces_dir / name, buffer.getvalue())
    index = {"format": FORMAT, "version": VERSION, "model": identity, "geometry": loaded.geometry.to_dict(),
             "settings": asdict(trace_settings), "traces": entries}
    write_atomic(traces_dir / "index.json", json.dumps(index, indent=1))
    # Gates read one (trace, split) item per step: their traces are mapped one at a time.
    traces = load_traces(traces_dir, geometry=loaded.geometry.to_dict(), lazy=settings.scorer == "gates")
    resumable = {"log_path": folder / "train.log.jsonl", "progress": progress, "state_path": folder / STATE,
                 "checkpoint_every": settings.checkpoint_every}
    if settings.scorer == "gates":
        config = GatesTrainConfig(steps=settings.steps, hidden=settings.hidden, horizon=settings.horizon,
                                  capacities=settings.capacities, sinks=settings.sinks, window=settings.window,
                                  seed=settings.seed,
                                  votes=settings.votes, anchored=settings.anchored, residual=settings.residual,
                                  objective=settings.objective, temperature=settings.temperature,
                                  uniform_too=settings.uniform_too)
        network, summary = train_gates(traces, config, **resumable,
                                       model=loaded.model if settings.objective == "answer" else None)
        save = save_gates
    else:
        config = TrainConfig(steps=settings.steps, hidden=settings.hidden, depth=settings.depth,
                             permutations=settings.permutations,
                             max_tokens=settings.max_tokens, sinks=settings.sinks, window=settings.window,
                             seed=settings.seed)
        network, summary = train_policy(traces, config, **resumable)
        save = save_policy
    summary.update(provenance, tasks=list(trace_settings.tasks), splits=["search"], trace_count=len(instances),
                   trace_uids=[entry["uid"] for entry in entries])
    save(final, network, model=identity, geometry=loaded.geometry.to_dict(), training=summary)
    (folder / STATE).unlink(missing_ok=True)
    for entry in entries:
        (traces_dir / entry["file"]).unlink(missing_ok=True)
    return final
