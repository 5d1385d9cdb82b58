"""RLOO training of the per-KV-head policies on pre-computed traces (paper §3.2, Alg. 1, App. A.2).

One step: draw a (trace, split ``n``) item; every head's policy scores the rankable tokens
(positions ``sinks .. n - window``; sinks and the recent window are always kept, so excluded,
App. A.2); ``K`` permutations per head are sampled at once by Gumbel-sort (Eq. 3), which samples
the Plackett-Luce policy of Eq. 2; each permutation gets the normalised all-budgets reward; the
REINFORCE gradient uses the leave-one-out baseline (Eq. 6) with advantages normalised by their
mean and standard deviation. AdamW, linear warm-up then cosine decay, gradient-norm clipping —
per head, since each head is its own agent that merely shares a batched module.

Two departures, both for a 2-core CPU budget and both noted in the report:
* ``max_tokens`` (off by default) ranks a random subset of the rankable tokens per step; the
  Plackett-Luce ranking of a subset is Plackett-Luce with the same scores, so the policy being
  learned is the same, at a fraction of the cost.
* the log-probability of a permutation is divided by its length, so long and short splits give
  gradients of comparable scale.
"""

from __future__ import annotations

import io
import json
import math
import time
from dataclasses import asdict
from pathlib import Path

import torch
from tqdm.auto import tqdm

from evolalloc.core.fileio import write_atomic
from evolalloc.core.phases import announce
from evolalloc.learned.reward import normalised_reward
from evolalloc.learned.settings import TrainConfig
from evolalloc.learned.traces import TraceSet
from evolalloc.runtime.policy import HeadPolicies, PolicyConfig


def gumbel_sort(scores: torch.Tensor, k: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``k`` Plackett-Luce permutations per row: scores ``[H, m]`` -> orders ``[H, k, m]``, best first."""
    uniform = torch.rand(scores.shape[0], k, scores.shape[1], generator=generator, device=scores.device)
    gumbel = -torch.log(-torch.log(uniform.clamp(1e-20, 1.0 - 1e-7)))
    return torch.argsort(scores.detach()[:, None, :] + gumbel, dim=-1, descending=True)


def plackett_luce_log_prob(scores: torch.Tensor, orders: torch.Tensor) -> torch.Tensor:
    """log pi(order) of Eq. 2: scores ``[H, m]``, orders ``[H, K, m]`` -> ``[H, K]`` (differentiable)."""
    ranked = torch.gather(scores[:, None, :].expand_as(orders), -1, orders)
    # The denominator at step i runs over the tokens not yet placed: a reverse cumulative logsumexp.
    remaining = torch.logcumsumexp(ranked.flip(-1), dim=-1).flip(-1)
    return (ranked - remaining).sum(-1)


def rloo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """Leave-one-out advantages ``[H, K]``, normalised per head by mean and standard deviation."""
    k = rewards.shape[-1]
    baseline = (rewards.sum(-1, keepdim=True) - rewards) / (k - 1)
    adv = rewards - baseline
    return (adv - adv.mean(-1, keepdim=True)) / (adv.std(-1, keepdim=True) + 1e-6)


def lr_factor(step: int, config) -> float:
    """Linear warm-up from 1 % to 100 %, then cosine decay to ``min_lr / lr``.

    ``config``: any training settings with ``steps``, ``warmup``, ``lr`` and ``min_lr`` (the
    policy's ``TrainConfig``, the gates' ``GatesTrainConfig``)."""
    if step < config.warmup:
        return 0.01 + 0.99 * step / max(1, config.warmup)
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    floor = config.min_lr / config.lr
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def clip_per_head(policy: HeadPolicies, max_norm: float) -> torch.Tensor:
    """Clip each head's gradient to ``max_norm`` (dim 0 of every parameter is the head); returns ``[H]`` norms."""
    params = [p for p in policy.parameters() if p.grad is not None]
    squared = sum(p.grad.pow(2).flatten(1).sum(1) for p in params)
    norms = squared.sqrt()
    scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for p in params:
        p.grad.mul_(scale.view(-1, *([1] * (p.grad.dim() - 1))))
    return norms


def item_tensors(traces: TraceSet, item: tuple[int, int], sinks: int, window: int, max_tokens: int | None = None,
                 generator=None):
    """Features ``[H, m, F]`` and importance ``[H, m]`` of the rankable tokens of one item.

    Rankable: positions ``sinks .. n - window``; with ``max_tokens``, a random subset of them
    (picked before building features, which is most of a step's data cost).
    """
    trace_idx, split_idx = item
    trace = traces.traces[trace_idx]
    n = int(trace["splits"][split_idx])
    layers, kv_heads = trace["keys"].shape[:2]
    positions = torch.arange(sinks, n - window)
    if max_tokens and positions.numel() > max_tokens:
        positions = positions[torch.randperm(positions.numel(), generator=generator)[:max_tokens].sort().values]
    keys = trace["keys"][:, :, positions].reshape(layers * kv_heads, positions.numel(), -1)
    values = trace["values"][:, :, positions].reshape(layers * kv_heads, positions.numel(), -1)
    importance = trace["importance"][split_idx][:, :, positions].reshape(layers * kv_heads, -1).float()
    return HeadPolicies.features(keys, values, positions, n), importance


def rankable(traces: TraceSet, item: tuple[int, int], sinks: int, window: int) -> bool:
    """At least two tokens left to rank once sinks and the window are set aside."""
    return int(traces.traces[item[0]]["splits"][item[1]]) - sinks - window >= 2


def fit_standardisation(policy: HeadPolicies, items, traces: TraceSet, sinks: int, window: int,
                        sample: int = 8) -> None:
    """Feature mean/std per head from up to ``sample`` items, so keys of any scale train alike."""
    feats = [item_tensors(traces, it, sinks, window)[0] for it in items[:sample]]
    policy.fit_standardisation(torch.cat(feats, dim=1))


def train(traces: TraceSet, config: TrainConfig, *, log_path: str | Path | None = None, progress: bool = True,
          state_path: str | Path | None = None, checkpoint_every: int = 0) -> tuple[HeadPolicies, dict]:
    """Train one policy per (layer, KV head) of the traces' model; returns (policy, summary).

    ``state_path``: where the training state (policy, optimizer, schedule, the sampling generator's
    state, step, costs) is written atomically every ``checkpoint_every`` steps; when the file
    exists, training continues from it and ends with the weights of an uninterrupted run.
    """
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    geometry = traces.index["geometry"]
    policy = HeadPolicies(PolicyConfig(geometry["num_layers"], geometry["num_kv_heads"], geometry["head_dim"],
                                       config.hidden, config.depth))
    items = [it for it in traces.items if rankable(traces, it, config.sinks, config.window)]
    if not items:
        raise ValueError("no trace split is longer than sinks + window + 2 tokens: nothing to rank")
    fit_standardisation(policy, items, traces, config.sinks, config.window)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, config))
    first, costs = 0, []
    if state_path is not None and Path(state_path).is_file():
        state = torch.load(state_path, map_location="cpu", weights_only=True)
        policy.load_state_dict(state["policy"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        generator.set_state(state["generator"])  # every later draw (items, subsets, permutations) as uninterrupted
        first, costs = int(state["step"]), list(state["costs"])
    log = open(log_path, "a" if first else "w") if log_path else None
    started = time.perf_counter()
    bar = tqdm(range(first, config.steps), desc="train", unit="step", disable=not progress, initial=first,
               total=config.steps)
    for step in bar:
        announce("training scorer", step, config.steps)
        item = items[int(torch.randint(len(items), (1,), generator=generator))]
        features, importance = item_tensors(traces, item, config.sinks, config.window, config.max_tokens, generator)
        scores = policy(features)  # [H, m]
        orders = gumbel_sort(scores, config.permutations, generator)
        rewards = normalised_reward(importance, orders)  # [H, K]
        advantages = rloo_advantages(rewards)
        log_prob = plackett_luce_log_prob(scores, orders) / orders.shape[-1]
        # Sum over heads: each head's gradient is its own agent's, untouched by the others.
        loss = -(advantages.detach() * log_prob).mean(-1).sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_per_head(policy, config.clip)
        optimizer.step()
        schedule.step()
        cost = float(-rewards.mean())
        costs.append(cost)
        if step % config.log_every == 0 or step == config.steps - 1:
            recent = sum(costs[-config.log_every :]) / len(costs[-config.log_every :])
            bar.set_postfix(cost=f"{recent:.3f}")
            if log:
                row = {"step": step, "loss": float(loss.detach()) / policy.config.heads, "normalised_cost": recent,
                       "lr": schedule.get_last_lr()[0], "seconds": round(time.perf_counter() - started, 2)}
                log.write(json.dumps(row) + "\n")
                log.flush()
        if (
            state_path is not None
            and checkpoint_every
            and (step + 1) % checkpoint_every == 0
            and step + 1 < config.steps
        ):
            buffer = io.BytesIO()
            torch.save({"policy": policy.state_dict(), "optimizer": optimizer.state_dict(),
                        "schedule": schedule.state_dict(),
                        "generator": generator.get_state(), "step": step + 1, "costs": costs}, buffer)
            write_atomic(state_path, buffer.getvalue())  # a kill leaves the previous state or this one
    if log:
        log.close()
    policy.eval()
    tail = costs[-max(1, len(costs) // 10) :]
    summary = {**asdict(config), "seconds": round(time.perf_counter() - started, 1),
               "final_train_cost": sum(tail) / len(tail), "traces_settings": traces.index.get("settings"),
               "traces": str(traces.folder), "items": len(items), "threads": torch.get_num_threads(),
               "resumed_at_step": first}
    return policy, summary
