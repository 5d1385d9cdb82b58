"""Episodes of the PPO eviction policy: the full cache's continuation teacher-forced under held budgets.

One episode (paper 003's KVM-TF / KVM-Distill environment, batched): a prompt of ``L`` tokens is
compressed to the budget ``b`` of every (layer, KV head) (the policy's first action: ``L - b`` draws per
head), then the full cache's greedy continuation ``t_0 .. t_{N-1}`` is fed one token at a time; after
each token fed the cache is cut back to ``b`` (interval 1: one draw per head per step) by the policy.
The reward of step ``j`` is ``log p_compressed(t_j) - log p_full(t_j)`` (``t_0`` comes from the prefill
and earns nothing; the last release is never followed by a reward, so it is not an action).

Rows of a batch are ``groups x rollouts`` episodes (a group: one prompt at one budget), all fed alike by
``runtime/held_likelihood.py`` in one evicted cache: one batched forward per step for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.learned.ppo_episodes import Episode
from evolalloc.learned.ppo_sampler import Release, TrainingPolicy, draw_prompt_release
from evolalloc.runtime.held_likelihood import held_logprobs_batch


@dataclass
class PromptRelease:
    """One group's prompt compressions: ``features`` ``[H, L, F]``, ``order`` ``[K, H, L]`` (released first),
    ``candidates`` ``[H, L]``, ``released`` tokens per head (``k``), for the group's rows ``first ..
    first + K - 1``."""

    features: torch.Tensor
    order: torch.Tensor
    candidates: torch.Tensor
    released: int
    first: int


@dataclass
class Rollout:
    """A batch of ``E`` episodes: ``rewards`` ``[E, N - 1]`` (``r_1 .. r_{N-1}``), what was released (at the
    prompt and while decoding), each row's ``budgets`` ``[E]``, ``groups`` of ``E / groups`` rows each."""

    rewards: torch.Tensor
    prompt_releases: list[PromptRelease]
    releases: list[Release]
    budgets: torch.Tensor
    groups: int
    prompt_length: int


def collect(model, policy: TrainingPolicy, episodes: list[Episode], chosen: list[tuple[int, int]], rollouts: int,
            interval: int, generator: torch.Generator | None) -> Rollout:
    """Run ``rollouts`` episodes of each ``(episode index, budget)`` in ``chosen`` in one batch.

    ``generator``: draws the releases; ``None`` runs the greedy policy (the lowest scores released), as
    the ``ppo-policy`` scorer does at inference.
    """
    network = policy.network()
    lengths = {episodes[i].length for i, _ in chosen}
    steps = {len(episodes[i].continuation) for i, _ in chosen}
    if len(lengths) != 1 or len(steps) != 1:
        raise ValueError("ppo episodes of one batch need prompts of one length and continuations of one length")
    rows, prompt_releases, budgets = [], [], []
    for index, budget in chosen:
        episode = episodes[index]
        layers, heads = episode.record.num_layers, network.config.num_kv_heads
        orders = []
        for _ in range(rollouts):
            ranking, order, candidates, released = draw_prompt_release(network, episode.features, budget,
                                                                       policy.sinks, policy.window, generator)
            record = episode.with_ranking(policy, ranking.view(layers, heads, -1))
            rows.append((record, np.full(layers, budget), episode.continuation))
            orders.append(order)
            budgets.append(budget)
        prompt_releases.append(PromptRelease(episode.features, torch.stack(orders), candidates, released,
                                             len(rows) - rollouts))
    policy.releases, policy.generator = [], generator
    forced = held_logprobs_batch(model, rows, policy, DecodeEviction(interval))
    rewards = torch.stack([row.token_logprobs[1:] - episodes[index].full_logprobs[1:]
                           for row, (index, _) in zip(forced, [c for c in chosen for _ in range(rollouts)])])
    return Rollout(rewards, prompt_releases, list(policy.releases), torch.tensor(budgets), len(chosen),
                   lengths.pop())
