"""PPO policy (paper 003, "Intelligently Managing KV-Cache with RL"): a per-step eviction policy trained with PPO.

Paper 003 frames eviction as a decision at every decoding step: the state is the cached tokens, the
action the token to release, the reward the model's log-probability of the full cache's next token
(teacher forcing / distillation). Its policy here is one small MLP shared by every (layer, KV head),
reading cheap per-token signals (``runtime/ppo_network.py``: H2O's accumulated attention, TOVA's last
query, SnapKV's recent queries, key/value norms, age, position, layer); a token's score is the MLP's
output, and at inference the lowest-scored tokens are released (the top-``b`` kept), while decoding
(``ranks_generated``) and, the same way, when the prompt is compressed after the prefill.

Training (``evolalloc ppo train``, ``learned/ppo_train.py``) draws the released tokens from a softmax
over the negated scores instead. The first ``sinks`` and last ``window`` tokens are always kept (the
checkpointed scorers' defaults); the newest token is therefore never released (as in the paper).
The checkpoint is read on first use and cached per file version, like ``learned``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evolalloc.runtime.capture import CaptureSpec
from evolalloc.runtime.ppo_network import RECENT_QUERIES, cached_features, prefill_features
from evolalloc.runtime.scorers import register_scorer
from evolalloc.runtime.scorers.base import CachedStats, LayerStats
from evolalloc.runtime.scorers.checkpointed import CheckpointScorer


@register_scorer("ppo-policy")
@dataclass
class PPOPolicy(CheckpointScorer):
    checkpoint_kind = "ppo"
    query_free = False
    ranks_generated = True
    records_prefill_sums = True  # its scores are the policy's: the prefill keeps the sums its features read

    @property
    def capture(self) -> CaptureSpec:
        return CaptureSpec(window_queries=RECENT_QUERIES, attention_sum=True)

    @staticmethod
    def _read(path, geometry=None, model=None):
        from evolalloc.runtime.ppo_network import load_ppo_policy  # deferred like learned's

        return load_ppo_policy(path, geometry=geometry, model=model)

    def network(self):
        """The network that scores (the checkpoint's; the trainer's sampling scorer gives its live one)."""
        return self.loaded().network

    def score(self, stats: LayerStats) -> torch.Tensor:
        network = self._checked(stats.layer_idx, *stats.keys.shape[::2], stats.keys.device)
        with torch.no_grad():
            return network(prefill_features(stats, network.config.num_layers), network.layer_heads(stats.layer_idx))

    def score_cached(self, stats: CachedStats) -> torch.Tensor:
        network = self._checked(stats.layer_idx, stats.keys.shape[1], stats.keys.shape[3], stats.keys.device)
        with torch.no_grad():
            return network(cached_features(stats, network.config.num_layers), network.layer_heads(stats.layer_idx))

    def _checked(self, layer: int, heads: int, dim: int, device: torch.device):
        """The network on ``device``, checked against one layer's shape (one line naming both sides)."""
        network = self.network().to(device)
        config = network.config
        if heads != config.num_kv_heads or dim != config.head_dim or layer >= config.num_layers:
            raise ValueError(f"ppo policy {self.checkpoint!r} was trained for {config.num_layers} layers x "
                             f"{config.num_kv_heads} KV heads x head_dim {config.head_dim}; got layer {layer} with "
                             f"{heads} KV heads x head_dim {dim}")
        return network
