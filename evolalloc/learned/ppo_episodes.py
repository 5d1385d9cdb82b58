"""The prompts a PPO eviction policy trains (and is compared) on, each with its teacher.

A prompt is exactly ``tokens`` tokens of the bundled public-domain prose (``fitness/tasks/prose.py``),
from a sentence start drawn per prompt from one split's passages only, so held-out prompts hold text
the training never read. Its teacher is the full cache's own greedy continuation and the full cache's
log-probability of each of its tokens (paper 003's distillation target: what the compressed cache
should still predict). Each prompt is prefilled once: the record (keys, values, the prefill's
accumulated attention) and every (layer, KV head)'s token features serve every episode drawn on it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import numpy as np
import torch

from evolalloc.runtime.decode import DecodeSettings, generate
from evolalloc.runtime.prefill import PrefillRecord, prefill
from evolalloc.runtime.scorers import Scorer


@dataclass
class Episode:
    """One prefilled prompt and its teacher.

    ``features`` ``[layers * Hkv, L, F]`` each head's prompt features; ``sums`` ``[layers, Hkv, L]`` the
    prefill's accumulated attention by position; ``continuation`` ``[N]`` the full cache's greedy tokens;
    ``full_logprobs`` ``[N]`` the full cache's log-probability of each.
    """

    record: PrefillRecord
    features: torch.Tensor
    sums: torch.Tensor
    continuation: torch.Tensor
    full_logprobs: torch.Tensor

    @property
    def length(self) -> int:
        return self.record.length

    def with_ranking(self, scorer: Scorer, ranking: torch.Tensor) -> PrefillRecord:
        """The record ranked by ``ranking`` ``[layers, Hkv, L]`` (best first) for ``scorer``, its sums in that
        order; keys and values shared, not copied."""
        scores = torch.zeros(ranking.shape, dtype=torch.float32)  # no adapter reads them in training
        return replace(self.record, rankings={scorer.key: ranking},
                       scores={scorer.key: scores, scorer.sums_key: self.sums.gather(-1, ranking)})


def prose_prompts(tokenizer, split: str, count: int, tokens: int, seed: int) -> list[list[int]]:
    """``count`` prompts of exactly ``tokens`` token ids, from distinct sentence starts of ``split``'s prose."""
    from fitness.tasks.prose import ProseHaystack

    prose = ProseHaystack(split)
    starts = prose.sentence_starts()
    if len(starts) < count:
        raise ValueError(f"the {split} prose has {len(starts)} sentences, fewer than {count} prompts")
    out = []
    for offset in random.Random(f"ppo/{split}/{seed}").sample(starts, count):
        ids = tokenizer.encode(" ".join(prose.pieces(2 * tokens, offset)))  # a word is at least one token
        out.append(ids[:tokens])
    return out


def build_episodes(model, prompts: list[list[int]], scorer, continuation: int,
                   batch_size: int = 8) -> list[Episode]:
    """Prefill each prompt with ``scorer`` (a ``TrainingPolicy``: it keeps the prompt's features) and
    continue it with the full cache for ``continuation`` greedy tokens."""
    episodes = []
    for ids in prompts:
        record = prefill(model, torch.tensor(ids), [scorer])
        layers = record.num_layers
        features = torch.cat([scorer.prompt_features[layer] for layer in range(layers)])  # [layers * Hkv, L, F]
        ranking = record.rankings[scorer.key]
        sums = torch.zeros(ranking.shape).scatter_(-1, ranking, record.scores[scorer.sums_key])
        episodes.append(Episode(record, features, sums, torch.empty(0, dtype=torch.long), torch.empty(0)))
    full = [(e.record, np.full(e.record.num_layers, e.length)) for e in episodes]  # budgets hold the prompt
    settings = DecodeSettings(max_new_tokens=continuation, keep_logits=True)  # no EOS: always N tokens
    for episode, generation in zip(episodes, generate(model, full, scorer, settings, batch_size=batch_size)):
        tokens = torch.tensor(generation.token_ids)
        logprobs = torch.log_softmax(torch.stack(generation.logits), dim=-1)
        episode.continuation = tokens
        episode.full_logprobs = logprobs.gather(1, tokens[:, None])[:, 0]
    return episodes
