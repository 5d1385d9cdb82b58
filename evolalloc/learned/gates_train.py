"""Training the global retention gates (paper 001) on the learned scorer's traces, the LLM frozen.

What the paper does (§2.2, §4, following TrimKV): a student model whose attention is
retention-gated (token ``i`` weighted by ``beta_i ** (t - i)`` at step ``t``) is distilled from
the full-cache teacher (a KL quality loss on the next-token distributions), with a hinge penalty
when the retained mass ``sum_i beta_i ** (t - i)`` exceeds the capacity; §4 replaces the
per-head capacity by one *global* capacity over all layers and heads.

What we implement, on a (trace, split ``n``) item of ``evolalloc.learned.traces``:

    r_(g,i)   = beta_(g,i) ** (n - i)                       retention at the compression point
    quality   = sum_(g,i) w_(g,i) (1 - r_(g,i)) / sum w     future attention the gates let decay
    capacity  = relu(sum_(g,i) r_(g,i) - M) / M,   M = (c - always_kept) * G   (global: all heads)
    loss      = quality + penalty * capacity

over every head ``g`` of every layer and the rankable tokens ``i`` (the sinks and the recent
window are always kept, as at inference), ``w`` the trace's future-attention importance (what
the next ``f`` queries pay each token), ``c`` drawn per step from ``capacities``.

Where it departs from the paper, because the traces hold keys, values and future attention but
no student forward: the quality term is the future attention mass lost to decay, a first-order
stand-in for the KL between teacher and retention-gated student (exact when the output is
linear in the attention weights); the gates read keys and values, not hidden states
(``runtime.gates``), and with ``votes = w`` also SnapKV's votes at the split (the traces'
``votes``: the last ``w`` queries before ``n``), so they see what the prompt asks about;
several capacities are trained at once so one gate set serves every
budget; and no next-token loss (the LLM is frozen and unused at training time).

Anchored gates (``anchored``, ``runtime.gates``) output a score, not a retention, so their loss is
a soft global top-k at the step's capacity instead:

    t         = the K-th largest score over all heads,  K = (c - always_kept) * G
    r_(g,i)   = sigmoid(s_(g,i) - t)                     soft "kept by the global top-k"
    loss      = quality(r) + penalty * relu(sum r - K) / K

``t`` moves with the scores (a shift of every score changes nothing), and the penalty stops the
soft tails from keeping more than ``K`` in all. They read the traces' ``snap_votes``. With
``residual = False`` only the per-head scale and offset train (the residual stays exactly 0): each
head ranks as SnapKV does, and what is learned is how heads compare in one global top-k.

``objective = "answer"`` trains anchored gates on the answer's likelihood through the frozen model
instead of on future attention (``learned.answer_train``); everything else here (draws, schedule,
checkpointing, resuming) is shared.
"""

from __future__ import annotations

import io
import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from evolalloc.core.fileio import write_atomic
from evolalloc.core.phases import announce
from evolalloc.learned.answer_train import answer_loss
from evolalloc.learned.traces import TraceSet, votes_window
from evolalloc.learned.train import lr_factor  # the policy's schedule: warm-up, then cosine
from evolalloc.runtime.gates import GatesConfig, RetentionGates, anchor_of, vote_features


@dataclass
class GatesTrainConfig:
    steps: int = 600
    lr: float = 3e-3
    min_lr: float = 1e-5
    warmup: int = 30
    clip: float = 1.0
    hidden: int = 32
    horizon: int = 32
    capacities: tuple[int, ...] = (64, 128, 256)
    penalty: float = 1.0
    sinks: int = 4
    window: int = 16
    seed: int = 0
    log_every: int = 10
    votes: int = 0  # query-aware gates: read the traces' SnapKV votes of this window (runtime.gates)
    anchored: bool = False  # anchored gates: SnapKV's vote + learned per-head map + residual (needs votes)
    residual: bool = True  # anchored gates: False trains the per-head scale and offset only
    objective: str = "attention"  # anchored gates: "answer" trains on the answer's NLL (learned.answer_train)
    temperature: float = 1.0  # answer objective: tau of the soft top-k
    uniform_too: bool = False  # answer objective: also the per-head (uniform) soft top-k's loss


def item_tensors(traces: TraceSet, item: tuple[int, int], sinks: int, window: int, votes: bool = False):
    """Features ``[G, m, 2D (+2 with votes)]``, importance ``[G, m]`` and ages ``n - i`` ``[m]`` of the
    rankable tokens."""
    trace_idx, split_idx = item
    trace = traces.traces[trace_idx]
    n = int(trace["splits"][split_idx])
    layers, kv_heads, _, key_dim = trace["keys"].shape
    positions = torch.arange(sinks, n - window)
    # The rankable tokens are one contiguous run: slice them (a view) and convert each float16
    # value once, straight into the float32 features — the same numbers as
    # ``RetentionGates.features`` of gathered copies, without three intermediate tensors of the
    # item's size per step (issue 22: the main job's 600 steps were ~40% copying).
    extra = 2 if votes else 0
    value_dim = trace["values"].shape[-1]
    features = torch.empty(layers, kv_heads, positions.numel(), key_dim + value_dim + extra, dtype=torch.float32)
    features[..., :key_dim].copy_(trace["keys"][:, :, sinks : n - window])
    features[..., key_dim : key_dim + value_dim].copy_(trace["values"][:, :, sinks : n - window])
    if votes:  # computed over the whole prefix (the pool reads neighbours), then the rankable part
        pooled = vote_features(trace["votes"][split_idx].reshape(layers * kv_heads, n))[:, positions]
        features[..., key_dim + value_dim :].copy_(pooled.view(layers, kv_heads, positions.numel(), 2))
    # Contiguous like the gathered copy it replaces: a strided view would sum in another order
    # (training would drift by ~1e-8 and no longer equal earlier runs bit for bit).
    importance = trace["importance"][split_idx][:, :, sinks : n - window].float().contiguous().view(layers * kv_heads,
                                                                                                    -1)
    return features.view(layers * kv_heads, positions.numel(), -1), importance, (n - positions).float()


def item_anchor(traces: TraceSet, item: tuple[int, int], sinks: int, window: int) -> torch.Tensor:
    """``anchor_of`` SnapKV's smoothed votes of the item's rankable tokens ``[G, m]`` (anchored gates)."""
    trace_idx, split_idx = item
    trace = traces.traces[trace_idx]
    n = int(trace["splits"][split_idx])
    snap = trace["snap_votes"][split_idx][:, :, sinks : n - window]
    return anchor_of(snap.reshape(-1, snap.shape[-1]))


def _sample_features(traces: TraceSet, items, sinks: int, window: int, votes: bool = False) -> torch.Tensor:
    """The items' features concatenated along the tokens ``[G, sum m, F]``: what ``torch.cat`` of
    them gives, filled item by item so that one item's features are alive at a time besides the
    result, not all of them twice (issue 22: ~0.3 GB less at the start of training at 1k tokens)."""
    widths = [int(traces.traces[t]["splits"][s]) - window - sinks for t, s in items]
    sample = None
    start = 0
    for item, width in zip(items, widths):
        features = item_tensors(traces, item, sinks, window, votes)[0]
        if sample is None:
            sample = features.new_empty(features.shape[0], sum(widths), features.shape[2])
        sample[:, start : start + width] = features
        start += width
        del features
    return sample


def gates_loss(gates: RetentionGates, features, importance, age, capacity: int, sinks: int, window: int,
               penalty: float):
    """``(loss, quality, used / M)`` for one item at per-head capacity ``capacity`` (see module docstring)."""
    retention = torch.exp(age * gates.log_retention(features))  # [G, m]
    quality = (importance * (1 - retention)).sum() / importance.sum().clamp_min(1e-12)
    allowed = max(1, capacity - sinks - window) * features.shape[0]
    used = retention.sum()
    loss = quality + penalty * torch.relu(used - allowed) / allowed
    return loss, quality, used / allowed


def anchored_loss(gates: RetentionGates, features, anchor, importance, capacity: int, sinks: int, window: int,
                  penalty: float):
    """``(loss, quality, used / K)`` of anchored gates for one item: a soft global top-k of
    ``K = (capacity - sinks - window) * G`` over the scores ``[G, m]`` (module docstring)."""
    scores = gates.anchored_score(features, anchor)  # [G, m]
    allowed = min(max(1, capacity - sinks - window) * features.shape[0], scores.numel())
    threshold = torch.topk(scores.reshape(-1), allowed).values[-1]
    kept = torch.sigmoid(scores - threshold)
    quality = (importance * (1 - kept)).sum() / importance.sum().clamp_min(1e-12)
    used = kept.sum()
    loss = quality + penalty * torch.relu(used - allowed) / allowed
    return loss, quality, used / allowed


def train_gates(traces: TraceSet, config: GatesTrainConfig, *, log_path: str | Path | None = None,
                progress: bool = True, state_path: str | Path | None = None, checkpoint_every: int = 0, model=None):
    """Train the gates of the traces' model; returns ``(gates, summary)``.

    ``model``: the traces' (frozen) model, needed by ``objective = "answer"`` only; its traces must
    hold ``answer_target`` (``learned.answer_train.answer_target``).

    ``state_path``: where the training state (gates, optimizer, schedule, step, running losses) is
    written atomically every ``checkpoint_every`` steps; when the file exists, training continues
    from it, and ends with the same weights as an uninterrupted run of the same seed.
    """
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    geometry = traces.index["geometry"]
    _check_traces(traces, config)
    gates = RetentionGates(GatesConfig(geometry["num_layers"], geometry["num_kv_heads"], geometry["head_dim"],
                                       config.hidden, config.horizon, config.votes, config.anchored))
    with_votes = bool(config.votes)
    items = _training_items(traces, config, model)
    # What `quality` is, in the log and the summary.
    measure = "answer_nll" if config.objective == "answer" else "attention_lost"
    gates.fit_standardisation(_sample_features(traces, items[:8], config.sinks, config.window, with_votes))
    if not config.residual and not config.anchored:
        raise ValueError("residual = False is a setting of anchored gates (the others are all residual)")
    # Calibration only: the residual's zero readout never moves, so it stays exactly 0.
    trained = gates.parameters() if config.residual else [gates.log_scale, gates.offset]
    optimizer = torch.optim.AdamW(trained, lr=config.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, config))
    # Every step's (item, capacity) is drawn up front, in the order the loop used to draw them, so a
    # resumed run makes the draws the uninterrupted one would have made from its step on.
    draws = [(rng.choice(items), rng.choice(config.capacities)) for _ in range(config.steps)]
    first, qualities, usage = _resume(state_path, gates, optimizer, schedule)
    log = open(log_path, "a" if first else "w") if log_path else None
    started = time.perf_counter()
    bar = tqdm(range(first, config.steps), desc="train gates", unit="step", disable=not progress,
               initial=first, total=config.steps)
    for step in bar:
        announce("training scorer", step, config.steps)
        item, capacity = draws[step]
        loss, quality, used = _item_loss(gates, traces, item, capacity, config, model)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for group in optimizer.param_groups for p in group["params"]], config.clip)
        optimizer.step()
        schedule.step()
        qualities.append(float(quality.detach()))
        usage.append(float(used.detach()))
        if step % config.log_every == 0 or step == config.steps - 1:
            recent = sum(qualities[-config.log_every:]) / len(qualities[-config.log_every:])
            bar.set_postfix(lost=f"{recent:.3f}", used=f"{usage[-1]:.2f}")
            if log:
                log.write(json.dumps({"step": step, "loss": float(loss.detach()), measure: recent, "capacity": capacity,
                                      "used_over_capacity": usage[-1], "lr": schedule.get_last_lr()[0],
                                      "seconds": round(time.perf_counter() - started, 2)}) + "\n")
                log.flush()
        if (state_path is not None and checkpoint_every and (step + 1) % checkpoint_every == 0
                and step + 1 < config.steps):
            _save_state(state_path, gates, optimizer, schedule, step + 1, qualities, usage)
    if log:
        log.close()
    gates.eval()
    tail = max(1, len(qualities) // 10)
    summary = {**asdict(config), "seconds": round(time.perf_counter() - started, 1),
               f"final_{measure}": sum(qualities[-tail:]) / tail, "final_used_over_capacity": sum(usage[-tail:]) / tail,
               "traces": str(traces.folder), "traces_settings": traces.index.get("settings"), "items": len(items),
               "threads": torch.get_num_threads(), "resumed_at_step": first}
    return gates, summary


def _check_traces(traces: TraceSet, config: GatesTrainConfig) -> None:
    """``ValueError`` unless the traces hold what these gates read: votes of the configured window
    for query-aware gates, SnapKV's smoothed votes for anchored ones."""
    if config.votes and votes_window(traces) != config.votes:
        raise ValueError(f"{traces.folder}: query-aware gates (votes={config.votes}) need traces with votes of window "
                         f"{config.votes}; these have {votes_window(traces) or 'none'} (trace them again with votes)")
    if config.anchored and not all("snap_votes" in trace for trace in traces.traces):
        raise ValueError(f"{traces.folder}: anchored gates need traces with SnapKV's smoothed votes (snap_votes); "
                         "these were traced before they were recorded (trace them again with votes)")


def _training_items(traces: TraceSet, config: GatesTrainConfig, model) -> list[tuple[int, int]]:
    """The ``(trace, split)`` items to train on: splits with at least 2 rankable tokens; for the
    answer objective, the prompt end only (where compression happens) of answers with a token after
    the first. ``ValueError`` when none is left, or when the answer objective lacks what it needs."""
    answer = config.objective == "answer"
    if answer and (not config.anchored or model is None):
        raise ValueError("the answer objective trains anchored gates (anchored = True) through their model (model=...)")
    items = [it for it in traces.items
             if int(traces.traces[it[0]]["splits"][it[1]]) - config.sinks - config.window >= 2]
    if answer:  # the prompt end only (where compression happens), and answers whose tokens after the first exist
        if not all("answer_target" in trace for trace in traces.traces):
            raise ValueError(f"{traces.folder}: the answer objective needs traces "
                             "with the full cache's answer (answer_target)")
        items = [(t, s) for t, s in items if int(traces.traces[t]["splits"][s]) == int(traces.traces[t]["prompt_len"])
                 and len(traces.traces[t]["answer_target"]) >= 2]
        if not items:
            raise ValueError(f"{traces.folder}: no traced prompt's answer has a "
                             "token after the first (the first comes from the "
                             "full prefill): nothing for the answer objective to train on")
    if not items:
        raise ValueError("no trace split is longer than sinks + window + 2 tokens: nothing to gate")
    return items


def _item_loss(gates: RetentionGates, traces: TraceSet, item: tuple[int, int], capacity: int,
               config: GatesTrainConfig, model):
    """``(loss, quality, used)`` of one training step's item at ``capacity``, by the objective:
    the answer's likelihood, anchored gates' soft top-k, or plain gates' retention."""
    features, importance, age = item_tensors(traces, item, config.sinks, config.window, bool(config.votes))
    if config.objective == "answer":
        anchor = item_anchor(traces, item, config.sinks, config.window)
        return answer_loss(gates, model, traces.traces[item[0]], features, anchor, capacity, config.sinks,
                           config.window, config.penalty, config.temperature, config.uniform_too)
    if config.anchored:
        anchor = item_anchor(traces, item, config.sinks, config.window)
        return anchored_loss(gates, features, anchor, importance, capacity, config.sinks, config.window,
                             config.penalty)
    return gates_loss(gates, features, importance, age, capacity, config.sinks, config.window, config.penalty)


def _resume(state_path, gates, optimizer, schedule) -> tuple[int, list[float], list[float]]:
    """``(first step, qualities, usage)`` so far: from the state at ``state_path`` when there is one
    (loading the gates, optimizer and schedule from it too), else a fresh start."""
    if state_path is None or not Path(state_path).is_file():
        return 0, [], []
    state = torch.load(state_path, map_location="cpu", weights_only=True)
    gates.load_state_dict(state["gates"])
    optimizer.load_state_dict(state["optimizer"])
    schedule.load_state_dict(state["schedule"])
    return int(state["step"]), list(state["qualities"]), list(state["usage"])


def _save_state(path, gates, optimizer, schedule, step: int, qualities: list[float], usage: list[float]) -> None:
    """The training state, written atomically: a kill leaves the previous state or this one."""
    buffer = io.BytesIO()
    torch.save({"gates": gates.state_dict(), "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
                "step": step, "qualities": qualities, "usage": usage}, buffer)
    write_atomic(path, buffer.getvalue())
