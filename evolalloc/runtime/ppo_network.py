"""The PPO eviction policy's network (paper 003, "Intelligently Managing KV-Cache with RL"): one small MLP,
shared by every (layer, KV head), scoring each cached token from cheap signals; and its checkpoint.

At every step over budget the token(s) to release are drawn, per (layer, KV head), from a softmax
over the negated scores while training (``learned/ppo_train.py``), and are the lowest scores at
inference (``runtime/scorers/ppo_policy.py``). Paper 003 reads a state of whole K/V tensors or token
ids; here, to stay cheap enough to train on one CPU thread, the state of a token is a handful of
features the online scorers already compute (``FEATURES``), so one network serves every head:

* ``h2o``: the attention the token received per query since it was written (H2O's accumulated sum,
  prefill and decoding, over the ``n - p`` queries that saw it), times the head's cached count;
* ``tova``: the last query's attention to it (TOVA), times the cached count;
* ``snap``: the mean attention of the last ``RECENT_QUERIES`` queries (SnapKV's votes, unpooled);
* ``knorm``, ``vnorm``: its key's and value's norm over the head's mean (log);
* ``position``, ``age``: ``log1p`` of its position and of the tokens written after it, over 8;
* ``relative``: position over the sequence length so far; ``layer``: layer index over ``layers - 1``.

Attention features are ``log(x + 1e-3)`` with ``x = 1`` for uniform attention, so a prompt ranked at
prefill (all ``L`` tokens cached) and a cache of ``b`` tokens while decoding read on one scale.
Features are standardised with one mean and deviation per feature, measured over every head on the
first training prompts (stored per head in the buffers ``PerHeadNetwork`` gives, all heads alike).

Checkpoint: ``PPO_FILE`` (format ``evolalloc-ppo-policy``, version 1), written and read like the
learned scorer's (``runtime/per_head.py``): geometry and model fingerprint checked on load.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from evolalloc.runtime.per_head import HeadGeometry, NetworkFile, PerHeadNetwork

FEATURES = ("h2o", "tova", "snap", "knorm", "vnorm", "position", "age", "relative", "layer")
#: queries whose mean attention is the ``snap`` feature (prefill: the prompt's last; decoding: the last fed)
RECENT_QUERIES = 8
_EPS = 1e-3


@dataclass(frozen=True)
class PPONetConfig(HeadGeometry):
    """``hidden`` units in each of ``depth`` hidden layers of the shared MLP."""

    hidden: int = 32
    depth: int = 2

    @property
    def features(self) -> int:  # not keys and values: the cheap signals above
        return len(FEATURES)


class PPONetwork(PerHeadNetwork):
    """``features [..., h, S, F]`` of the heads ``heads`` selects -> scores ``[..., h, S]`` (higher: keep)."""

    def __init__(self, config: PPONetConfig):
        if config.depth < 1 or config.hidden < 1:
            raise ValueError(f"ppo policy depth and hidden must be >= 1, got depth={config.depth}, "
                             f"hidden={config.hidden}")
        super().__init__(config)
        sizes = [config.features] + [config.hidden] * config.depth
        layers: list[nn.Module] = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(fan_in, fan_out), nn.Tanh()]
        head = nn.Linear(config.hidden, 1)
        with torch.no_grad():  # a near-uniform first policy: every token about as likely to go (explores)
            head.weight.mul_(0.01)
            head.bias.zero_()
        self.mlp = nn.Sequential(*layers, head)

    def forward(self, features: torch.Tensor, heads: slice | torch.Tensor) -> torch.Tensor:
        if features.shape[-1] != self.config.features:
            raise ValueError(f"ppo policy takes {self.config.features} features per token, got {features.shape[-1]}")
        x = (features - self.feature_mean[heads]) / self.feature_std[heads]  # [h, 1, F] broadcast over [..., h, S, F]
        return self.mlp(x)[..., 0]

    @torch.no_grad()
    def fit_standardisation(self, features: torch.Tensor) -> None:
        """One mean and deviation per feature from a sample ``[..., F]`` of every head's tokens, so the layer
        index survives (a per-head standardisation would zero it)."""
        flat = features.reshape(-1, features.shape[-1]).float()
        self.feature_mean.copy_(flat.mean(dim=0).expand_as(self.feature_mean))
        self.feature_std.copy_(flat.std(dim=0).clamp_min(1e-4).expand_as(self.feature_std))


def token_features(*, h2o, tova, snap, keys, values, positions, length, valid, layer: int,
                   num_layers: int) -> torch.Tensor:
    """The ``FEATURES`` of one layer's cached tokens ``[..., S, F]`` float32 (``...``: ``[Hkv]`` at prefill,
    ``[B, Hkv]`` while decoding).

    ``h2o``: accumulated attention per KV head ``[..., S]``; ``tova``, ``snap``: attention ``[..., S]``;
    ``keys``, ``values`` ``[..., S, D]``; ``positions`` ``[..., S]`` original positions; ``length``: the
    sequence length so far, broadcastable to ``[..., S]``; ``valid`` ``[..., S]`` bool (the cached tokens).
    """
    positions = positions.float()
    length = torch.as_tensor(length, dtype=torch.float32, device=positions.device)
    count = valid.sum(dim=-1, keepdim=True).clamp_min(1).float()  # tokens cached in the head
    seen_by = (length - positions).clamp_min(1.0)  # queries p .. n-1 attended to the token at p

    def attention(x: torch.Tensor) -> torch.Tensor:
        return torch.log(x.float().clamp_min(0.0) * count + _EPS)

    def relative_norm(x: torch.Tensor) -> torch.Tensor:
        norm = x.float().norm(dim=-1) * valid
        return torch.log((norm + 1e-6) / (norm.sum(dim=-1, keepdim=True) / count + 1e-6))

    age = (length - 1.0 - positions).clamp_min(0.0)
    columns = [attention(h2o / seen_by), attention(tova), attention(snap), relative_norm(keys),
               relative_norm(values), torch.log1p(positions) / 8, torch.log1p(age) / 8,
               positions / length.clamp_min(1.0), torch.full_like(positions, layer / max(1, num_layers - 1))]
    features = torch.stack([torch.broadcast_to(c, positions.shape) for c in columns], dim=-1)
    return torch.where(valid[..., None], features, torch.zeros_like(features)).nan_to_num(0.0)


def prefill_features(stats, num_layers: int) -> torch.Tensor:
    """A prompt's features ``[Hkv, L, F]`` from the prefill's ``LayerStats`` (attention sum and window)."""
    heads, length = stats.keys.shape[:2]
    window = stats.window_attention  # [Hq, w, L]
    positions = torch.arange(length, device=stats.keys.device).expand(heads, length)
    return token_features(
        h2o=stats.per_kv_head(stats.attention_sum), tova=stats.per_kv_head(window[:, -1, :]),
        snap=stats.per_kv_head(window[:, -RECENT_QUERIES:, :].mean(dim=1)), keys=stats.keys, values=stats.values,
        positions=positions, length=length, valid=torch.ones_like(positions, dtype=torch.bool),
        layer=stats.layer_idx, num_layers=num_layers)


def cached_features(stats, num_layers: int) -> torch.Tensor:
    """A decoding cache's features ``[B, Hkv, S, F]`` from ``CachedStats`` (online sums and recent queries)."""
    recent = stats.recent_attention[:, :, -RECENT_QUERIES:, :]  # [B, Hq, w, S]; rows of unfed queries are 0
    fed = (recent.sum(dim=-1, keepdim=True) > 0).sum(dim=2).clamp_min(1)  # [B, Hq, 1]
    return token_features(
        h2o=stats.attention_sum, tova=stats.per_kv_head(stats.recent_attention[:, :, -1, :]),
        snap=stats.per_kv_head(recent.sum(dim=2) / fed), keys=stats.keys, values=stats.values,
        positions=stats.positions, length=stats.length[:, None, None], valid=stats.valid,
        layer=stats.layer_idx, num_layers=num_layers)


def fresh_network(geometry: dict, hidden: int, depth: int, seed: int) -> PPONetwork:
    """A new network for a model ``geometry`` (``ModelGeometry.to_dict()``), its weights drawn from ``seed``."""
    torch.manual_seed(seed)
    config = PPONetConfig(geometry["num_layers"], geometry["num_kv_heads"], geometry["head_dim"], hidden, depth)
    return PPONetwork(config)


PPO_FILE = NetworkFile(what="ppo policy", fmt="evolalloc-ppo-policy", version=1, train_hint="evolalloc ppo train",
                       settings=("hidden", "depth"), config_class=PPONetConfig, network_class=PPONetwork)
save_ppo_policy, load_ppo_policy = PPO_FILE.save, PPO_FILE.load

__all__ = ["FEATURES", "PPONetConfig", "PPONetwork", "PPO_FILE", "RECENT_QUERIES", "cached_features",
           "fresh_network", "load_ppo_policy", "prefill_features", "save_ppo_policy", "token_features"]
