"""The PPO pieces of the eviction policy's training, as pure tensor functions (tested on hand-made batches).

An action of one (layer, KV head) at one step releases ``k`` of its candidate tokens (``k = 1`` per
step while decoding at interval 1; ``L - b`` when a prompt of ``L`` tokens is compressed to ``b``),
drawn one after another without replacement from a softmax over the negated scores (Plackett-Luce on
``-score``). Each draw is a sub-action with its own probability ratio; all the draws of every head at
one step share that step's advantage (the heads are agents sharing one reward). The clipped objective
is taken per draw (PPO, Schulman et al. 2017, Eq. 7):

    L = -mean( min(r A, clip(r, 1 - eps, 1 + eps) A) ),   r = exp(log pi_new(draw) - log pi_old(draw))

Advantages: discounted Monte-Carlo returns, minus a per-step baseline, the mean return at that step of
the other episodes of the same prompt and budget (leave-one-out), normalised by their deviation.
"""

from __future__ import annotations

import torch

_NEVER = -1e9  # the logit of a token that cannot be released: finite, so no NaN reaches a gradient


def release_log_probs(scores: torch.Tensor, order: torch.Tensor, candidates: torch.Tensor,
                      released: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-draw log-probabilities of releasing tokens in ``order``.

    ``scores`` ``[..., S]`` (higher: keep); ``order`` ``[..., S]`` slot indices, the released ones first in
    the order drawn; ``candidates`` ``[..., S]`` bool, the slots that could be released; ``released``
    ``[...]`` how many were (``k``, at most the candidates). Returns ``(log_probs, drawn)``, both
    ``[..., S]``: draw ``i``'s ``log softmax(-scores over the candidates not yet released)`` at the token
    it released, and whether draw ``i`` happened (``i < k``); ``log_probs`` is 0 where it did not.
    """
    logits = torch.where(candidates, -scores, torch.full_like(scores, _NEVER)).gather(-1, order)
    remaining = torch.logcumsumexp(logits.flip(-1), dim=-1).flip(-1)  # log-sum over draw i and after
    drawn = torch.arange(order.shape[-1], device=order.device) < released[..., None]
    return torch.where(drawn, logits - remaining, torch.zeros_like(logits)), drawn


def first_draw_entropy(scores: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
    """``[...]``: the entropy of the first release's distribution over the candidates of ``scores [..., S]``."""
    logits = torch.where(candidates, -scores, torch.full_like(scores, _NEVER))
    log_p = torch.log_softmax(logits, dim=-1)
    return -(log_p.exp() * log_p).sum(dim=-1)


def clipped_surrogate(new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
                      clip: float) -> torch.Tensor:
    """PPO's clipped objective per sub-action (to maximise): ``min(r A, clip(r, 1 - clip, 1 + clip) A)``."""
    ratio = torch.exp(new_log_probs - old_log_probs)
    return torch.minimum(ratio * advantages, ratio.clamp(1 - clip, 1 + clip) * advantages)


def discounted_returns(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """``rewards [E, T]`` (reward ``t`` follows action ``t``) -> returns ``[E, T]``: ``sum_i>=t gamma^(i-t) r_i``."""
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in range(rewards.shape[1] - 1, -1, -1):
        running = rewards[:, t] + gamma * running
        returns[:, t] = running
    return returns


def group_advantages(returns: torch.Tensor, groups: int) -> torch.Tensor:
    """``returns [E, T]`` of ``groups`` groups of ``E / groups`` episodes each (consecutive rows: one
    prompt and budget) -> advantages ``[E, T]``: each return minus the mean of its group's other
    episodes at the same step, divided by the deviation of all of them."""
    episodes, steps = returns.shape
    per_group = returns.view(groups, episodes // groups, steps)
    k = per_group.shape[1]
    others = (per_group.sum(dim=1, keepdim=True) - per_group) / (k - 1)
    advantages = (per_group - others).reshape(episodes, steps)
    return advantages / (advantages.std() + 1e-8)
