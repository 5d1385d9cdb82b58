"""Offline PPO training of the per-step eviction policy (paper 003) on the search split's prose.

The pool (``learned/ppo_episodes.py``): prompts of the bundled prose, each prefilled once and continued
by the full cache. Each update draws ``prompts_per_update`` prompts (without replacement) and one budget
each, runs ``rollouts`` episodes of each in one batch (``learned/ppo_rollout.py``), then takes the
clipped PPO steps (``learned/ppo_update.py``). Deterministic given the seed: the network's weights, the
prompts, the draws of prompts and budgets (``random.Random``) and every release (one ``torch.Generator``)
come from it, on one thread.

The log (JSON lines, one per update) holds the reward curve a results page plots: ``reward`` is the mean
per-token log-probability gap to the full cache over the update's episodes (0: as good as the full cache).
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from evolalloc.core.errors import UserError
from evolalloc.core.phases import announce
from evolalloc.learned.ppo_episodes import Episode, build_episodes, prose_prompts
from evolalloc.learned.ppo_rollout import collect
from evolalloc.learned.ppo_sampler import TrainingPolicy
from evolalloc.learned.ppo_settings import PPOSettings
from evolalloc.learned.ppo_update import ppo_update
from evolalloc.runtime.ppo_network import PPONetwork, fresh_network
from evolalloc.runtime.support import sliding_windows


def check_trainable(model, settings: PPOSettings, policy: TrainingPolicy) -> None:
    """``UserError`` (one line) for a model or budgets the training cannot use, before any prefill."""
    if any(w is not None for w in sliding_windows(model.config)):
        raise UserError("ppo training supports full-attention models only (this one has sliding-window layers)",
                        field="--model")
    low = min(settings.budgets)
    if low < policy.min_budget:
        raise UserError(f"budget {low} is below the {policy.min_budget} tokens ppo-policy always keeps "
                        f"({policy.sinks} sinks + {policy.window} recent)", field="ppo budgets")


def train_ppo(loaded, settings: PPOSettings, *, prompts: list[list[int]] | None = None,
              log_path: str | Path | None = None, progress: bool = True) -> tuple[PPONetwork, dict]:
    """Train a policy for ``loaded`` (a ``LoadedModel``); returns ``(network, summary)``.

    ``prompts``: token ids to train on instead of the bundled prose (tests use hand-made ones).
    """
    policy = TrainingPolicy()
    check_trainable(loaded.model, settings, policy)
    started = time.perf_counter()
    network = fresh_network(loaded.geometry.to_dict(), settings.hidden, settings.depth, settings.seed)
    policy.attach(network, None)
    if prompts is None:
        prompts = prose_prompts(loaded.tokenizer, settings.split, settings.prompts, settings.prompt_tokens,
                                settings.seed)
    announce("ppo: prefilling and continuing the prompts", 0, 1)
    episodes = build_episodes(loaded.model, prompts, policy, settings.continuation)
    network.fit_standardisation(torch.cat([e.features for e in episodes[:8]], dim=1))
    optimizer = torch.optim.Adam(network.parameters(), lr=settings.lr)
    draws, generator = random.Random(settings.seed), torch.Generator().manual_seed(settings.seed)
    curve = []
    log = open(log_path, "w") if log_path else None
    try:
        for update in tqdm(range(settings.updates), desc="ppo", unit="update", disable=not progress):
            announce("training ppo policy", update, settings.updates)
            chosen = [(i, draws.choice(settings.budgets))
                      for i in draws.sample(range(len(episodes)), settings.prompts_per_update)]
            rollout = collect(loaded.model, policy, episodes, chosen, settings.rollouts, settings.interval, generator)
            figures = ppo_update(network, optimizer, rollout, gamma=settings.gamma, epochs=settings.epochs,
                                 clip=settings.clip, entropy=settings.entropy)
            row = {"update": update, "reward": float(rollout.rewards.mean()), **figures,
                   "seconds": round(time.perf_counter() - started, 2)}
            curve.append(row)
            if log:
                log.write(json.dumps(row) + "\n")
                log.flush()
    finally:
        if log:
            log.close()
    return network, summary_of(settings, curve, started, len(episodes))


def summary_of(settings: PPOSettings, curve: list[dict], started: float, prompts: int) -> dict:
    """What the checkpoint records of its training (``checkpoint_provenance`` reads steps, seed, tasks,
    splits and the prompt count from it), with the reward at the start and at the end."""
    tenth = max(1, len(curve) // 10)
    mean = lambda rows: sum(r["reward"] for r in rows) / len(rows)  # noqa: E731
    return {**settings.to_dict(), "steps": settings.updates, "tasks": ["prose"], "splits": [settings.split],
            "trace_count": prompts, "algorithm": "ppo", "seconds": round(time.perf_counter() - started, 1),
            "first_reward": mean(curve[:tenth]), "final_reward": mean(curve[-tenth:]),
            "threads": torch.get_num_threads()}


@torch.no_grad()
def greedy_reward(model, network: PPONetwork, episodes: list[Episode], budget: int, interval: int = 1) -> float:
    """The mean per-token reward of the greedy policy (lowest scores released, as the scorer at inference)
    on ``episodes`` at ``budget``: one episode each."""
    policy = TrainingPolicy().attach(network, None)
    rollout = collect(model, policy, episodes, [(i, budget) for i in range(len(episodes))], 1, interval, None)
    return float(rollout.rewards.mean())
