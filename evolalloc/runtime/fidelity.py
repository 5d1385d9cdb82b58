"""Fidelity scores: how closely a compressed cache follows the full cache's own continuation, with no labels.

Every score reads one teacher-forced forward (``runtime/likelihood.py``, or ``runtime/held_likelihood.py``
with the budgets held while decoding) of the full cache's greedy tokens ``y_1..y_n``
(``runtime/continuation.py``): per token, the compressed cache's log-probability ``lc_t`` of ``y_t``,
whether ``y_t`` is its most likely token there (``top1_t``), and the full cache's own ``lf_t``. Each
score is in [0, 1] and the full cache's own budgets score 1; they differ in what a candidate can gain
by differing from the full cache in the "wrong" direction:

* ``fidelity`` — ``min(1, exp(mean_t lc_t - mean_t lf_t))``: the likelihood kept, capped on the mean.
  A cache *surer* of most tokens than the full cache makes up for the tokens it loses, so a search can
  climb it by writing differently (results/decode-time: the searched profiles kept 1.00-1.08 of the
  full cache's likelihood and agreed with its greedy text less than uniform budgets did).
* ``fidelity-tokens`` — ``mean_t min(1, exp(lc_t - lf_t))``: capped per token, so no token's surplus
  pays for another's loss.
* ``fidelity-abs`` — ``exp(-mean_t |lc_t - lf_t|)``: any change of a token's log-probability costs,
  up or down.
* ``fidelity-top1`` — ``mean_t top1_t``: the share of the full cache's tokens the compressed cache
  would itself have written greedily after the same text; up to its first miss this is greedy
  decoding's own agreement, so it reads what the held-out test measures, in one forward.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from evolalloc.runtime.likelihood import TeacherForced


def likelihood_kept(logprobs: torch.Tensor, full_logprobs: torch.Tensor) -> float:
    """``exp(mean(logprobs) - mean(full_logprobs))`` over the same ``[n]`` tokens: the ratio of the two
    caches' per-token (geometric-mean) likelihoods of the full cache's text."""
    _check_same(logprobs, full_logprobs)
    return math.exp(float(logprobs.double().mean() - full_logprobs.double().mean()))


def _check_same(logprobs: torch.Tensor, full_logprobs: torch.Tensor) -> None:
    if logprobs.shape != full_logprobs.shape or logprobs.numel() == 0:
        raise ValueError(f"need the same non-empty tokens, got shapes {tuple(logprobs.shape)} "
                         f"and {tuple(full_logprobs.shape)}")


def capped_mean(forced: TeacherForced, full_logprobs: torch.Tensor) -> float:
    return min(1.0, likelihood_kept(forced.token_logprobs, full_logprobs))


def capped_per_token(forced: TeacherForced, full_logprobs: torch.Tensor) -> float:
    _check_same(forced.token_logprobs, full_logprobs)
    gap = forced.token_logprobs.double() - full_logprobs.double()
    return float(gap.clamp(max=0.0).exp().mean())


def absolute_gap(forced: TeacherForced, full_logprobs: torch.Tensor) -> float:
    _check_same(forced.token_logprobs, full_logprobs)
    return math.exp(-float((forced.token_logprobs.double() - full_logprobs.double()).abs().mean()))


def top1_share(forced: TeacherForced, full_logprobs: torch.Tensor) -> float:
    _check_same(forced.top1, full_logprobs)
    return float(forced.top1.double().mean())


# Fitness mode -> score of one instance (``fitness.task.FIDELITY_MODES`` names the same modes).
FIDELITY_SCORES: dict[str, Callable[[TeacherForced, torch.Tensor], float]] = {
    "fidelity": capped_mean,
    "fidelity-tokens": capped_per_token,
    "fidelity-abs": absolute_gap,
    "fidelity-top1": top1_share,
}


def fidelity_score(mode: str, forced: TeacherForced, full_logprobs: torch.Tensor) -> float:
    """Instance score in [0, 1] of fitness mode ``mode`` (a key of ``FIDELITY_SCORES``)."""
    return FIDELITY_SCORES[mode](forced, full_logprobs)
