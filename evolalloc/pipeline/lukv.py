"""LU-KV's offline profiling: a utility curve per (layer, KV head) from the search split.

Utility, exactly (evolalloc's definition; the paper's "oracle importance" in our terms): for one
instance, the *future* queries are the tokens that come after the compressed context, the
question (fed after compression) and the task's first reference answer, teacher-forced. Their
attention to context position ``p`` in layer ``l``, averaged over those queries and the query
heads of KV head ``h``, is ``a[l, h, p]`` (uncompressed cache, so each unit is judged alone; the
rest of the cache is full). When unit ``(l, h)`` keeps budget ``b``, it keeps the first ``b``
positions of the run scorer's ranking (the prefill record's, always-kept tokens first), and

    U[l, h, b] = mean over instances of  sum_{p in top-b of ranking[l, h]} a[l, h, p]

is the attention mass of the future queries that it still sees. It is non-decreasing in ``b``
and reaches the unit's whole context mass at ``b = L``; a unit that barely reads the context
(its queries attend to themselves) has a flat curve and gets few tokens. Prompts shorter than
the longest one hold their full mass beyond their length.

Cost: the future tokens fed over each search record's keys and values (``future_attention_after``):
a forward of a few tokens per instance, no second prefill of the context (a bounded record, which keeps
only some keys, is prefilled again whole), no decoding, no evaluation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from evolalloc.core.baselines.lukv import CURVES_FILE, UtilityCurves
from evolalloc.runtime.capture import CaptureSpec, PrefillCapture
from evolalloc.runtime.support import text_config

UTILITY = ("attention mass the future queries (question + first reference answer, teacher-forced) put on the "
           "top-b tokens of the run scorer's ranking, per (layer, "
           "KV head), uncompressed cache, mean over the search split")


@torch.no_grad()
def future_attention(model, context_ids, future_ids) -> torch.Tensor:
    """``[num_layers, Hkv, L]`` float32: the mean attention of the ``future_ids`` queries to each
    of the ``L`` context tokens, over those queries and the query heads of each KV group.

    One causal forward over context + future; the capture records the attention rows of the
    last ``len(future_ids)`` queries only (``CaptureSpec.window_queries``).
    """
    context = torch.as_tensor(context_ids, dtype=torch.long).reshape(-1)
    future = torch.as_tensor(future_ids, dtype=torch.long).reshape(-1)
    if len(future) == 0:
        raise ValueError("no future tokens: the instance has neither a question to feed nor a reference answer")
    device = next(model.parameters()).device
    ids = torch.cat([context, future]).to(device)[None, :]
    capture = PrefillCapture(CaptureSpec(window_queries=len(future)))
    model(input_ids=ids, position_ids=torch.arange(ids.shape[1], device=device)[None, :], use_cache=False,
          logits_to_keep=1, evolalloc_capture=capture)
    return _per_kv_head(model, capture, len(context))


@torch.no_grad()
def future_attention_after(model, record, future_ids) -> torch.Tensor:
    """``future_attention`` of the tokens after a whole prefill ``record``: they are fed as one chunk over
    its keys and values at their positions (``L ..``), as a chunked prefill feeds its next chunk, so the
    context is not run through the model again. The same as ``future_attention`` up to float rounding
    (the attention kernels sum in another order; tests/pipeline/test_lukv_future.py) — and up to the
    record's own rounding when it stores K/V narrower than the model computes (``engine.record_dtype``
    bfloat16 under a float32 model: what every evaluation of the run attends over too).
    """
    from evolalloc.runtime.cache import EvictedCache

    if record.bound is not None:
        raise ValueError("a bounded record keeps only some keys: prefill the context whole first")
    future = torch.as_tensor(future_ids, dtype=torch.long).reshape(-1)
    if len(future) == 0:
        raise ValueError("no future tokens: the instance has neither a question to feed nor a reference answer")
    device = next(model.parameters()).device
    dtype = record.compute_dtype
    keys = [k.to(device=device, dtype=dtype or k.dtype)[None] for k in record.keys]
    values = [v.to(device=device, dtype=dtype or v.dtype)[None] for v in record.values]
    cache = EvictedCache(keys, values, [None] * len(keys), room=len(future))
    length = record.length
    capture = PrefillCapture(CaptureSpec(window_queries=len(future)), length=length + len(future))
    positions = torch.arange(length, length + len(future), device=device)[None, :]
    model(input_ids=future.to(device)[None, :], position_ids=positions, past_key_values=cache, use_cache=True,
          logits_to_keep=1, evolalloc_capture=capture)
    return _per_kv_head(model, capture, length)


def _per_kv_head(model, capture, length: int) -> torch.Tensor:
    """The captured future rows ``[Hq, w, L + w]`` of each layer -> ``[num_layers, Hkv, L]``: their mean
    on each context token, over the ``w`` queries and the query heads of each KV group."""
    kv_heads = text_config(model.config).num_key_value_heads
    per_layer = []
    for layer in range(text_config(model.config).num_hidden_layers):
        rows = capture.window_attention[layer][:, :, :length]  # [Hq, w, L]
        per_layer.append(rows.mean(dim=1).reshape(kv_heads, -1, length).mean(dim=1))
    return torch.stack(per_layer).float()


def instance_curves(attention: torch.Tensor, ranking: torch.Tensor) -> np.ndarray:
    """``[layers, Hkv, L + 1]``: ``U[.., b]`` = the attention on the top-``b`` ranked positions.

    ``attention``: ``[layers, Hkv, L]``; ``ranking``: ``[layers, Hkv, L]`` positions, best first.
    """
    kept = torch.gather(attention, -1, ranking.to(attention.device).long()).cumsum(dim=-1)
    return torch.nn.functional.pad(kept, (1, 0)).double().cpu().numpy()


@dataclass(frozen=True)
class ProfiledTask:
    """What profiling one task of a run reads (handed by the experiment, ``pipeline/experiment.py``):
    ``instances(split)`` and ``records(split)`` are its splits' (prefilled on first need)."""

    label: str
    weight: float
    task: object
    instances: Callable[[str], list]
    records: Callable[[str], list]
    question_after_compression: bool
    source: str | None


@dataclass(frozen=True)
class ProfiledRun:
    """The run's pieces the curves are profiled with and described by: the loaded model, the run's scorer
    and its always-kept floor, the geometry (to check a saved file), the model spec and task names."""

    loaded: object
    scorer: object
    min_budget: int
    geometry: object
    model_spec: str
    task_names: str
    tasks: tuple[ProfiledTask, ...]


def _same_tokens(record, context) -> bool:
    """Whether ``record`` prefilled exactly ``context`` (its keys are the context's)."""
    if record.prompt_ids is None or record.length != len(context):
        return False
    return torch.equal(record.prompt_ids.cpu(), torch.as_tensor(context, dtype=torch.long).reshape(-1))


def profile_part(loaded, scorer, part: ProfiledTask, split: str = "search") -> tuple[np.ndarray, int]:
    """Sum of the instance curves of one task's split, padded to its longest prompt:
    ``([layers, Hkv, B + 1], number of instances)``."""
    from evolalloc.core.phases import announce
    from evolalloc.runtime.instances import tokenize_instance
    from evolalloc.runtime.spill import release

    qac = part.question_after_compression
    curves = []
    records = part.records(split)  # prefilled now if they were not (announced as prefilling)
    announce("profiling lukv")  # its own phase in the report's "where it went", not the search's or shipping's
    for instance, record in zip(part.instances(split), records):
        context, question = tokenize_instance(loaded.tokenizer, instance, qac)
        # A task judged against the full cache has no reference: without a question, refused below.
        references = () if part.task.judged_against_full_cache else part.task.reference_continuations(instance)
        answer = loaded.tokenizer.encode(references[0], add_special_tokens=False) if references else []
        future = list(question or []) + list(answer)
        if not future:
            from evolalloc.core.errors import UserError

            raise UserError("lukv profiles the attention of the tokens after "
                            f"the context, and instance {instance.uid} has "
                            "neither a question fed after compression nor a reference answer",
                            source=part.source,
                            field="baselines")
        if record.bound is not None or not _same_tokens(record, context):
            # a bounded record's ranking holds b_max slot indices, not positions, and it lacks keys: whole again
            from evolalloc.runtime.prefill import prefill

            record = prefill(loaded.model, context, [scorer], uid=instance.uid, question_ids=question)
        attention = future_attention_after(loaded.model, record, future)
        curves.append(instance_curves(attention, record.rankings[scorer.key]))
        release(record)  # a spilled record's K/V were mapped to be read: unmap them (runtime/spill.py)
    top = max(c.shape[2] for c in curves)
    total = np.zeros(curves[0].shape[:2] + (top,))
    for c in curves:  # a shorter prompt keeps all its mass at every larger budget
        total[:, :, : c.shape[2]] += c
        total[:, :, c.shape[2]:] += c[:, :, -1:]
    return total, len(curves)


def profile_curves(run: ProfiledRun, split: str = "search") -> UtilityCurves:
    """The run's utility curves (``UtilityCurves``) on ``split``; several tasks: the weighted mean of
    each task's mean curve."""
    parts, weights, counts = [], [], {}
    for task in run.tasks:
        total, n = profile_part(run.loaded, run.scorer, task, split)
        parts.append(total / n)
        weights.append(task.weight)
        counts[task.label] = n
    top = max(p.shape[2] for p in parts)
    utility = sum(w * np.pad(p, ((0, 0), (0, 0), (0, top - p.shape[2])), mode="edge") for w, p in zip(weights, parts))
    utility /= sum(weights)
    meta = {"utility": UTILITY, "split": split, "instances": sum(counts.values()), "per_task": counts,
            "scorer": run.scorer.name, "scorer_params": run.scorer.params(), "model": run.model_spec,
            "task": run.task_names}
    return UtilityCurves(utility, floor=run.min_budget, meta=meta)


def run_curves(run: Callable[[], ProfiledRun], run_dir: Path | None) -> UtilityCurves:
    """The run's curves: read from ``run_dir/lukv-curves.npz`` when it is there, else profiled on
    the search split and (with a run folder) saved there, so compare and evaluate re-use them.
    ``run`` makes the pieces (the model is loaded only when the curves must be profiled or checked)."""
    path = Path(run_dir) / CURVES_FILE if run_dir is not None else None
    if path is not None and path.is_file():
        curves = UtilityCurves.load(path)
        check_curves(curves, run(), str(path))
        return curves
    curves = profile_curves(run())
    if path is not None:
        curves.save(path)
    return curves


def check_curves(curves: UtilityCurves, run: ProfiledRun, where: str) -> None:
    """Refuse curves profiled for another geometry or scorer (``UserError`` naming the file)."""
    from evolalloc.core.errors import UserError

    g = run.geometry
    if curves.utility.shape[:2] != (g.num_layers, g.num_kv_heads):
        raise UserError(f"curves for {curves.utility.shape[:2]} (layers, KV heads), the model has "
                        f"{(g.num_layers, g.num_kv_heads)}", source=where, field="utility")
    scorer = run.scorer
    params = json.loads(json.dumps(scorer.params()))  # as the file holds them (tuples read back as lists)
    if (curves.meta.get("scorer"), curves.meta.get("scorer_params")) != (scorer.name, params):
        raise UserError(f"profiled with scorer {curves.meta.get('scorer')!r} "
                        f"{curves.meta.get('scorer_params')}, the run "
                        f"ranks with {scorer.name!r} {scorer.params()}; delete the file to profile again", source=where,
                        field="meta.scorer")
