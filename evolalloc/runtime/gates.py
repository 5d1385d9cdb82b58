"""Retention gates with a shared final projection (paper 001, "Make Each Token Count", §4), and their checkpoint.

Every (layer, KV head) has a small gate ``phi_(l,h)``: features -> ``hidden`` (GELU). One
final projection ``w, b``, *shared by all layers and heads* (weight-tied), reads every gate out:

    logit_(l,h)(x) = w . phi_(l,h)(x) + b,        beta = sigmoid(logit)  in (0, 1)

so a retention ``beta`` means the same in every head, and tokens of different layers and heads
can be ranked against each other (one global top-k, ``runtime.adaptive.global_topk``).

Input features: the token's cached key and value ``[key (D), value (D)]`` (what the runtime and
the traces hold), standardised per head with statistics fitted on the training traces. The
paper feeds the token's hidden state instead; a key/value gate needs no change to the model's
forward and runs on any prefill record.

Query-aware gates (``votes = w > 0``, not in the paper): two more features per token, SnapKV's
votes — the attention the prompt's last ``w`` queries pay the token, summed over those queries
and averaged over the KV group's query heads — as ``log(vote + eps)`` and the same after a
max-pool over ``VOTE_POOL`` neighbouring tokens (SnapKV's smoothing: the tokens around a
looked-at one, e.g. the rest of a needle's answer, get its vote). A key/value gate cannot tell a
common-word needle from the other words; the votes say what the question looks at. The shared
readout is unchanged, so the scores stay comparable across layers and heads (global top-k, the
hybrid). ``votes = 0`` is the query-free gate above, unchanged.

Anchored gates (``anchored = True``, needs ``votes``; issue 21): the score is SnapKV's own vote
plus a learned per-head affine map and a residual,

    score_(l,h)(x) = exp(s_(l,h)) * log(snap + tiny) + o_(l,h) + w . phi_(l,h)(x)

with ``snap`` SnapKV's smoothed vote exactly as the ``snapkv`` scorer computes it (the window's
attention summed over its queries, max-pooled over ``VOTE_POOL`` tokens per *query* head, then
averaged over the KV group; ``snap_votes``). ``s = o = 0`` and the shared readout ``w = 0`` at
initialisation, so a fresh network ranks every head exactly as SnapKV does, and a global top-k
over it compares SnapKV's votes across heads. Training moves the per-head scale and offset (the
cross-head calibration a global top-k needs) and the residual (what keys and values add). Why:
query-aware gates that must learn the vote as 2 of 130 features from ~36 traces under-use it and
rank ~25 points below SnapKV on a common-word needle; anchored ones start at SnapKV. The score is
not a retention: no horizon is applied (``horizon`` is stored but unused).

Score at compression (paper §4, "horizon weights" all 1): a token at position ``i`` of an
``n``-token prompt, with retention ``beta``, scores its predicted utility over the next ``W``
steps, ``sum_{k=1..W} beta ** (n - i + k)``; we rank by its logarithm,
``(n - i) log beta + log sum_{k=1..W} beta ** k`` (``W = 1`` is the myopic score of TrimKV).

Checkpoint (``torch.save`` of a plain dict, loaded with ``weights_only=True``)::

    format: "evolalloc-gates", version: 1
    model: {"spec", "model_type", "fingerprint"}     # runtime.policy.model_identity
    geometry: ModelGeometry.to_dict()                # checked on load
    config: {"hidden", "horizon"}, and "votes" when > 0 (query-aware), and "anchored" when true
    training: free-form provenance
    state_dict: the module's tensors
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from evolalloc.runtime.per_head import HeadGeometry, NetworkFile, PerHeadNetwork

VOTE_POOL = 7  # SnapKV's kernel
VOTE_EPS = 1e-6  # floor of a vote before its log (a vote is an attention sum in [0, w])
ANCHOR_TINY = 1e-30  # the anchor's floor: far below any float32 softmax sum, so log keeps SnapKV's order


@dataclass(frozen=True)
class GatesConfig(HeadGeometry):
    hidden: int = 32
    horizon: int = 32
    votes: int = 0  # window of SnapKV votes read (query-aware gates); 0: key/value only
    anchored: bool = False  # score = per-head affine map of log(SnapKV vote) + residual (needs votes)

    @property
    def features(self) -> int:
        return 2 * self.head_dim + (2 if self.votes else 0)


def vote_features(votes: torch.Tensor) -> torch.Tensor:
    """votes ``[h, L]`` (every position of the prompt, so the pool sees true neighbours) -> ``[h, L, 2]``:
    ``log(vote + eps)`` and ``log(maxpool(vote) + eps)``, float32."""
    votes = votes.float()
    pooled = F.max_pool1d(votes[:, None, :], kernel_size=VOTE_POOL, stride=1, padding=VOTE_POOL // 2)[:, 0, :]
    return torch.stack([torch.log(votes + VOTE_EPS), torch.log(pooled + VOTE_EPS)], dim=-1)


def snap_votes(per_query_head: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """SnapKV's smoothed votes, as the ``snapkv`` scorer (max pooling over the whole prompt) makes
    them: window attention summed over its queries ``[Hq, L]`` -> max-pooled per query head ->
    averaged over each KV group ``[Hkv, L]``, float32. Pooling before the group mean is what
    SnapKV does; ``vote_features`` pools after it, so the two differ under GQA."""
    from evolalloc.runtime.scorers.snapkv import smooth_votes  # SnapKV's own smoothing, one definition

    pooled = smooth_votes(per_query_head.float(), VOTE_POOL)
    return pooled.view(kv_heads, -1, pooled.shape[-1]).mean(dim=1)


def anchor_of(snap: torch.Tensor) -> torch.Tensor:
    """``log`` of SnapKV's smoothed votes ``[..., L]``: the anchored gates' base score."""
    return torch.log(snap.float().clamp_min(ANCHOR_TINY))


class RetentionGates(PerHeadNetwork):
    """``heads`` gates ``features -> hidden`` (batched) and one shared ``hidden -> 1`` readout.

    Head ``g`` is (layer ``g // num_kv_heads``, KV head ``g % num_kv_heads``).
    """

    def __init__(self, config: GatesConfig, initial_retention: float = 0.995):
        if config.hidden < 1 or config.horizon < 1:
            raise ValueError(f"gates hidden and horizon must be >= 1, got {config.hidden}, {config.horizon}")
        if config.anchored and not config.votes:
            raise ValueError("anchored gates read SnapKV's votes: they need votes > 0")
        super().__init__(config)
        bound = config.features**-0.5
        self.weight = nn.Parameter(torch.empty(config.heads, config.features, config.hidden).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.zeros(config.heads, 1, config.hidden))
        self.shared = nn.Linear(config.hidden, 1)  # THE shared final projection: one parameter set
        with torch.no_grad():
            self.shared.weight.mul_(0.1)
            # Start near "keep everything": long-range tokens are not evicted before learning says so.
            self.shared.bias.fill_(float(torch.logit(torch.tensor(initial_retention))))
        if config.anchored:
            # Start AT SnapKV: unit scale, no offset, a zero residual (the readout is zero, so the
            # residual's first gradient moves the readout, then the per-head networks).
            self.log_scale = nn.Parameter(torch.zeros(config.heads, 1))
            self.offset = nn.Parameter(torch.zeros(config.heads, 1))
            with torch.no_grad():
                self.shared.weight.zero_()
                self.shared.bias.zero_()

    @staticmethod
    def features(keys: torch.Tensor, values: torch.Tensor, votes: torch.Tensor | None = None) -> torch.Tensor:
        """keys, values ``[h, m, D]`` (and, for query-aware gates, ``vote_features`` ``[h, m, 2]``)
        -> ``[h, m, 2D (+2)]`` float32."""
        parts = [keys.float(), values.float()] + ([votes.float()] if votes is not None else [])
        return torch.cat(parts, dim=-1)

    def log_retention(self, features: torch.Tensor, heads: slice | torch.Tensor | None = None) -> torch.Tensor:
        """features ``[h, m, F]`` of the selected heads -> ``log beta`` ``[h, m]`` (< 0)."""
        select = slice(None) if heads is None else heads
        x = self.standardised(features, select)
        hidden = torch.nn.functional.gelu(torch.baddbmm(self.bias[select], x, self.weight[select]))
        return torch.nn.functional.logsigmoid(self.shared(hidden)[..., 0])

    def anchored_score(self, features: torch.Tensor, anchor: torch.Tensor,
                       heads: slice | torch.Tensor | None = None) -> torch.Tensor:
        """Anchored gates: features ``[h, m, F]`` and ``anchor_of(snap)`` ``[h, m]`` of the selected
        heads -> scores ``[h, m]`` on one scale across heads (module docstring)."""
        select = slice(None) if heads is None else heads
        x = self.standardised(features, select)
        hidden = torch.nn.functional.gelu(torch.baddbmm(self.bias[select], x, self.weight[select]))
        residual = self.shared(hidden)[..., 0]
        return torch.exp(self.log_scale[select]) * anchor + self.offset[select] + residual


def horizon_score(log_beta: torch.Tensor, age: torch.Tensor, horizon: int) -> torch.Tensor:
    """``log sum_{k=1..W} beta ** (age + k)`` = ``age log beta + log sum_k beta ** k``, computed stably.

    log_beta ``[..., m]`` (< 0), age ``[m]`` (``n - i``, >= 1) -> ``[..., m]``.
    """
    lb = log_beta.clamp(max=-1e-7)
    geometric = lb + torch.log(-torch.expm1(horizon * lb)) - torch.log(-torch.expm1(lb))
    return age.to(lb.dtype) * lb + geometric


GATES_FILE = NetworkFile(what="gates", fmt="evolalloc-gates", version=1, train_hint="evolalloc gates train",
                         settings=("hidden", "horizon"), config_class=GatesConfig, network_class=RetentionGates)
# Query-aware gates store "votes" too, anchored ones "anchored" as well; query-free ones are
# written exactly as before (and every older file loads: a missing setting is its default).
_VOTES_FILE = replace(GATES_FILE, settings=(*GATES_FILE.settings, "votes"))
_ANCHORED_FILE = replace(_VOTES_FILE, settings=(*_VOTES_FILE.settings, "anchored"))
load_gates = GATES_FILE.load


def save_gates(path, network: RetentionGates, **fields):
    """Write a gates checkpoint atomically (``NetworkFile.save``)."""
    config = network.config
    chosen = _ANCHORED_FILE if config.anchored else _VOTES_FILE if config.votes else GATES_FILE
    return chosen.save(path, network, **fields)
