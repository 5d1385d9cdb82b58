"""The learned scorer's network: one small MLP per KV head, batched over heads, and its checkpoint.

The KV Policy paper ("Learning to evict from key-value cache", §3.1, App. A.2) scores a cached
token from its key, value and position only: ``f(k, v, pos)``, one MLP per KV head. Here every
head of the model is one slice of a single batched module, so a forward over all heads is a few
``bmm`` calls instead of ``layers x kv_heads`` small ones.

Features of a token at position ``i`` among ``n`` cached ones: ``[key (D), value (D), i / n]``,
standardised per head with a mean and standard deviation measured on the training traces
(stored in the checkpoint, so inference sees exactly what training saw).

Checkpoint (``torch.save`` of a plain dict, loaded with ``weights_only=True``)::

    format: "evolalloc-policy", version: 1
    model: {"spec", "model_type", "fingerprint"}   # which model the traces came from
    geometry: ModelGeometry.to_dict()              # layers, KV heads, head_dim ... checked on load
    config: PolicyConfig fields (hidden, depth)
    training: free-form provenance (steps, seed, sinks, window, seconds, ...)
    state_dict: the module's tensors

``load_policy`` refuses a file of another format or version, or one whose geometry or model
does not match what the caller expects, with a ``ValueError`` naming both sides.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
from torch import nn

from evolalloc.runtime.per_head import HeadGeometry, NetworkFile, PerHeadNetwork


@dataclass(frozen=True)
class PolicyConfig(HeadGeometry):
    """``hidden`` units per hidden layer; ``depth`` hidden layers (2 x 256 as in the paper)."""

    hidden: int = 256
    depth: int = 2

    extra_features = 1  # the token's position i / n


class HeadPolicies(PerHeadNetwork):
    """``heads`` independent MLPs ``features -> hidden (-> hidden)* -> 1``, evaluated together.

    Head ``h`` is (layer ``h // num_kv_heads``, KV head ``h % num_kv_heads``).
    """

    def __init__(self, config: PolicyConfig):
        if config.depth < 1 or config.hidden < 1:
            raise ValueError(f"policy depth and hidden must be >= 1, got depth={config.depth}, hidden={config.hidden}")
        super().__init__(config)
        sizes = [config.features] + [config.hidden] * config.depth + [1]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            bound = fan_in**-0.5  # the default nn.Linear scale, per head
            self.weights.append(nn.Parameter(torch.empty(config.heads, fan_in, fan_out).uniform_(-bound, bound)))
            self.biases.append(nn.Parameter(torch.zeros(config.heads, 1, fan_out)))

    @staticmethod
    def features(keys: torch.Tensor, values: torch.Tensor, positions: torch.Tensor | None = None,
                 length: int | None = None) -> torch.Tensor:
        """keys, values ``[H, m, D]`` -> ``[H, m, 2D + 1]`` float32.

        ``positions`` ``[m]`` of the tokens in a cache of ``length`` (default: all of ``0..m-1``);
        the position feature is ``position / length``.
        """
        heads, m, _ = keys.shape
        if positions is None:
            positions, length = torch.arange(m, device=keys.device), m
        position = (positions.to(keys.device, torch.float32) / max(int(length), 1)).expand(heads, m)
        return torch.cat([keys.float(), values.float(), position[..., None]], dim=-1)

    def forward(self, features: torch.Tensor, heads: slice | torch.Tensor | None = None) -> torch.Tensor:
        """features ``[h, n, F]`` for the heads selected by ``heads`` (all when ``None``) -> scores ``[h, n]``."""
        select = slice(None) if heads is None else heads
        x = self.standardised(features, select)
        last = len(self.weights) - 1
        for i, (weight, bias) in enumerate(zip(self.weights, self.biases)):
            x = torch.baddbmm(bias[select], x, weight[select])
            if i < last:
                x = torch.nn.functional.gelu(x)
        return x[..., 0]


def model_identity(spec: str, model) -> dict:
    """What identifies the model a policy was trained for: its spec, type and a weight fingerprint.

    The fingerprint hashes layer 0's key projection, so a renamed copy of the same model matches
    and a different model with the same shape does not.
    """
    weight = model.model.layers[0].self_attn.k_proj.weight.detach().float().cpu().contiguous()
    digest = hashlib.sha256(weight.numpy().tobytes()).hexdigest()[:16]
    return {"spec": spec, "model_type": model.config.model_type, "fingerprint": digest}


POLICY_FILE = NetworkFile(what="policy", fmt="evolalloc-policy", version=1, train_hint="evolalloc scorer train",
                          settings=("hidden", "depth"), config_class=PolicyConfig, network_class=HeadPolicies)
save_policy, load_policy = POLICY_FILE.save, POLICY_FILE.load
