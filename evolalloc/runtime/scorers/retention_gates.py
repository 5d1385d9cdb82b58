"""Retention gates (paper 001): a token's score is its predicted utility over the next ``horizon``
steps from a per-head gate read out by one projection shared by all heads (``runtime.gates``).

Query-free, like ``learned``, unless the checkpoint was trained with ``votes = w``: then the
gates also read SnapKV's votes of the prompt's last ``w`` queries, the capture asks the prefill
for that window (``LayerStats.window_attention``, as SnapKV's does), and a path that records no
window attention is refused. The scores are on one scale across layers and heads, which is what
the ``global-topk`` method's one top-k (``runtime.adaptive.global_topk``) needs; with a per-head
budget this is an ordinary per-head ranking. Anchored gates (``anchored`` in the checkpoint) score
SnapKV's smoothed vote through a learned per-head affine map plus a residual; untrained, they rank
each head as ``snapkv`` with ``window = votes`` does. Train a checkpoint with ``evolalloc gates train``
or ``scorer.train`` in a recipe.

Named ``retention-gates``; ``gates``, its old name, still loads (``core/scorer_names.py``), and a
scorer asked for by it keeps it (``get_scorer``), so an old recipe's files are written as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evolalloc.core.scorer_names import RETENTION_GATES
from evolalloc.runtime.capture import CaptureSpec
from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import LayerStats
from evolalloc.runtime.scorers.checkpointed import CheckpointScorer


@register_scorer(RETENTION_GATES)
@dataclass
class RetentionGatesScorer(CheckpointScorer):
    horizon: int = 0  # 0: the checkpoint's

    checkpoint_kind = "gates"  # the trained network's file (core.paths), whichever name the scorer is asked by
    why_not_generated = ("its gates were trained to rank a prompt at its end (the horizon counts from there, and "
                         "query-aware or anchored gates read the prompt's window votes)")

    @staticmethod
    def _read(path, geometry=None, model=None):
        from evolalloc.runtime.gates import load_gates

        return load_gates(path, geometry=geometry, model=model)

    @property
    def votes(self) -> int:
        """The checkpoint's votes window (0: query-free gates, or no checkpoint written yet — a run
        that trains its gates asks again once they exist)."""
        from evolalloc.core.paths import resolve_checkpoint

        if not resolve_checkpoint(self.checkpoint_kind, self.checkpoint).is_file():
            return 0
        return self.loaded().network.config.votes

    @property
    def query_free(self) -> bool:  # the base's class-level flag, per checkpoint here
        return self.votes == 0

    @property
    def capture(self) -> CaptureSpec:
        return CaptureSpec(window_queries=self.votes)

    def score(self, stats: LayerStats) -> torch.Tensor:
        from evolalloc.runtime.gates import anchor_of, horizon_score, snap_votes, vote_features

        gates = self.loaded().network
        config = gates.config
        heads, length, dim = stats.keys.shape
        if heads != config.num_kv_heads or dim != config.head_dim or stats.layer_idx >= config.num_layers:
            raise ValueError(f"gates {self.checkpoint!r} were trained for "
                             f"{config.num_layers} layers x {config.num_kv_heads} "
                             f"KV heads x head_dim {dim}; got layer {stats.layer_idx} "
                             f"with {heads} KV heads x head_dim {dim}")
        votes = None
        if config.votes:
            window = stats.window_attention
            if window is None or window.shape[1] < min(config.votes, length):
                raise ValueError(f"gates {self.checkpoint!r} are query-aware "
                                 f"(votes={config.votes}: they read the attention of "
                                 f"the prompt's last {config.votes} queries), and this path records "
                                 f"{'none' if window is None else window.shape[1]}; use query-free gates here")
            per_query_head = window[:, -config.votes :, :].float().sum(dim=1)  # [Hq, L]
            votes = vote_features(stats.per_kv_head(per_query_head))  # [Hkv, L, 2]
        with torch.no_grad():
            gates.to(stats.keys.device)
            if config.anchored:  # a score on one scale across heads, not a retention: no horizon
                anchor = anchor_of(snap_votes(per_query_head, heads))  # [Hkv, L]
                return gates.anchored_score(gates.features(stats.keys, stats.values, votes), anchor,
                                            gates.layer_heads(stats.layer_idx))
            log_beta = gates.log_retention(gates.features(stats.keys, stats.values, votes),
                                           gates.layer_heads(stats.layer_idx))
            age = length - torch.arange(length, device=stats.keys.device)
            return horizon_score(log_beta, age, self.horizon or config.horizon)
