"""One PPO update of the eviction policy from a ``Rollout``: every release drawn becomes a sub-action
(``learned/ppo_loss.py``), its advantage its episode's at that step; then ``epochs`` passes of the
clipped objective over the whole batch, each pass one gradient step.

Sub-actions of one shape are stacked so a pass is a few batched MLP calls: the prompt compressions
(``[K, H, L]`` per group) and the decoding releases (``[E_s, B, Hkv, S]`` per cache width ``S``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import torch

from evolalloc.learned.ppo_loss import (
    clipped_surrogate,
    discounted_returns,
    first_draw_entropy,
    group_advantages,
    release_log_probs,
)
from evolalloc.learned.ppo_rollout import Rollout


@dataclass
class Part:
    """Stacked sub-actions of one shape: ``features [..., h, S, F]`` of the heads ``heads`` (indexing the
    network's head buffers, broadcast to ``[..., h]``), ``order`` / ``candidates`` ``[..., h, S]``,
    ``released`` ``[..., h]`` and ``advantages`` broadcastable to ``[..., h, 1]``."""

    features: torch.Tensor
    heads: torch.Tensor | slice
    order: torch.Tensor
    candidates: torch.Tensor
    released: torch.Tensor
    advantages: torch.Tensor

    def evaluate(self, network) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(log-probabilities, advantages)`` of the draws, flat, and the first draws' entropies, flat."""
        scores = network(self.features, self.heads)
        scores = scores.expand(self.order.shape) if scores.dim() < self.order.dim() else scores
        candidates = self.candidates.expand(self.order.shape)
        log_probs, drawn = release_log_probs(scores, self.order, candidates, self.released)
        acted = self.released > 0
        entropy = first_draw_entropy(scores, candidates)[acted]
        return log_probs[drawn], self.advantages.expand(drawn.shape)[drawn], entropy


def parts_of(rollout: Rollout, advantages: torch.Tensor, kv_heads: int) -> list[Part]:
    """The rollout's sub-actions, stacked by shape; ``advantages`` ``[E, N - 1]`` (action ``j`` at column ``j``)."""
    parts = []
    for group in rollout.prompt_releases:
        if group.released == 0:
            continue  # the budget holds the whole prompt: nothing was released
        k = group.order.shape[0]
        rows = advantages[group.first : group.first + k, 0]
        parts.append(Part(group.features, slice(None), group.order, group.candidates,
                          torch.full(group.order.shape[:2], group.released), rows[:, None, None]))
    by_width = defaultdict(list)
    for release in rollout.releases:
        step = release.length - rollout.prompt_length  # t_{step - 1} was fed: the rewards from r_{step + 1} follow
        if step >= advantages.shape[1]:
            continue  # the last release: no reward follows it
        released = (release.counts - rollout.budgets[:, None]).clamp_min(0)
        by_width[release.order.shape[-1]].append((release, released, advantages[:, step]))
    for items in by_width.values():
        heads = torch.stack([torch.arange(r.layer * kv_heads, (r.layer + 1) * kv_heads) for r, _, _ in items])
        releases, released, rows = zip(*items)
        parts.append(Part(torch.stack([r.features for r in releases]), heads[:, None, :],
                          torch.stack([r.order for r in releases]), torch.stack([r.candidates for r in releases]),
                          torch.stack(released), torch.stack(rows)[..., None, None]))
    return parts


def ppo_update(network, optimizer, rollout: Rollout, *, gamma: float, epochs: int, clip: float,
               entropy: float) -> dict:
    """Update ``network`` in place from ``rollout``; returns the update's figures for the training log."""
    returns = discounted_returns(rollout.rewards, gamma)  # [E, N - 1]: G_j for action j
    advantages = group_advantages(returns, rollout.groups)
    parts = parts_of(rollout, advantages, network.config.num_kv_heads)
    network.train()
    old = None
    for _ in range(epochs):
        evaluated = [part.evaluate(network) for part in parts]
        new = torch.cat([e[0] for e in evaluated])
        old = new.detach() if old is None else old  # the first pass is the policy that acted
        surrogate = clipped_surrogate(new, old, torch.cat([e[1] for e in evaluated]), clip)
        spread = torch.cat([e[2] for e in evaluated]).mean()
        loss = -surrogate.mean() - entropy * spread
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(network.parameters(), 1.0)
        optimizer.step()
    network.eval()
    with torch.no_grad():
        ratio = torch.exp(new.detach() - old)
    return {"loss": float(loss.detach()), "entropy": float(spread.detach()), "draws": int(old.numel()),
            "clipped": float(((ratio - 1).abs() > clip).float().mean()),
            "approx_kl": float((old - new.detach()).mean())}
