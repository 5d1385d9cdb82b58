"""The PPO policy compared with the online heuristics on held-out prose, budgets held while decoding.

Each held-out prompt (``learned/ppo_episodes.py: prose_prompts`` on the held-out passages) is prefilled
once with every scorer, continued by the full cache for ``continuation`` greedy tokens, and that
continuation is teacher-forced under each scorer with every (layer, KV head) holding ``budget``, cut
back every ``interval`` tokens (``runtime/held_likelihood.py``): exactly the decoding the scorer would
do had it produced those tokens. Per scorer: the mean per-token log-likelihood of the continuation
(tokens 1 .. N - 1: the first comes from the prefill, the same for all), its gap to the full cache's,
and the project's likelihood score (mean per-token probability, ``runtime/likelihood.reference_score``).
"""

from __future__ import annotations

import numpy as np
import torch

from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.learned.ppo_episodes import prose_prompts
from evolalloc.runtime.decode import DecodeSettings, generate
from evolalloc.runtime.held_likelihood import held_logprobs
from evolalloc.runtime.likelihood import reference_score
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import Scorer

BASELINES = ("h2o", "tova", "snapkv", "streaming")


@torch.no_grad()
def compare_at_budget(model, scorers: list[Scorer], prompts: list[list[int]], *, continuation: int, budget: int,
                      interval: int, batch_size: int = 8) -> dict:
    """``{"full": {...}, "rows": {scorer key: {...}}}``: each scorer's teacher-forced log-likelihood of the
    full cache's continuation of ``prompts`` at ``budget`` per (layer, KV head), per prompt and on average."""
    records = [prefill(model, torch.tensor(ids), scorers) for ids in prompts]
    full = [(r, np.full(r.num_layers, r.length)) for r in records]
    generations = generate(model, full, scorers[0], DecodeSettings(max_new_tokens=continuation, keep_logits=True),
                           batch_size=batch_size)
    tokens = [torch.tensor(g.token_ids) for g in generations]
    full_lp = [torch.log_softmax(torch.stack(g.logits), dim=-1).gather(1, t[:, None])[:, 0][1:]
               for g, t in zip(generations, tokens)]
    out = {"full": _summary(full_lp, full_lp), "rows": {}}
    for scorer in scorers:
        rows = [(r, np.full(r.num_layers, budget), t) for r, t in zip(records, tokens)]
        forced = held_logprobs(model, rows, scorer, DecodeEviction(interval), batch_size=batch_size)
        out["rows"][scorer.key] = _summary([f.token_logprobs[1:] for f in forced], full_lp)
    return out


def _summary(logprobs: list[torch.Tensor], full: list[torch.Tensor]) -> dict:
    per_prompt = [float(lp.mean()) for lp in logprobs]
    gaps = [float((lp - f).mean()) for lp, f in zip(logprobs, full)]
    return {"loglik": float(np.mean(per_prompt)), "gap": float(np.mean(gaps)),
            "likelihood_score": float(np.mean([reference_score(lp) for lp in logprobs])),
            "per_prompt_loglik": per_prompt, "per_prompt_gap": gaps}


def heldout_comparison(loaded, ppo: Scorer, baselines: list[Scorer], *, prompts: int, prompt_tokens: int,
                       continuation: int, budget: int, interval: int, seed: int) -> dict:
    """``compare_at_budget`` on ``prompts`` held-out prose prompts of ``prompt_tokens`` tokens, the PPO
    policy first; the settings recorded beside the numbers."""
    ids = prose_prompts(loaded.tokenizer, "heldout", prompts, prompt_tokens, seed)
    result = compare_at_budget(loaded.model, [ppo, *baselines], ids, continuation=continuation, budget=budget,
                               interval=interval)
    result["settings"] = {"model": loaded.spec, "prompts": prompts, "prompt_tokens": prompt_tokens,
                          "continuation": continuation, "budget": budget, "interval": interval, "seed": seed,
                          "split": "heldout", "checkpoint": ppo.params().get("checkpoint")}
    return result


def render(result: dict) -> str:
    """The comparison as a small markdown table: each scorer's mean log-likelihood per token, its gap to the
    full cache, the likelihood score, and on how many prompts the PPO policy (the first row) does better."""
    rows = result["rows"]
    first = next(iter(rows.values()))["per_prompt_loglik"]
    lines = ["| scorer | log-lik / token | gap to full | likelihood score | PPO better on |", "|---|---|---|---|---|"]
    full = result["full"]
    lines.append(f"| full cache | {full['loglik']:.3f} | 0 | {full['likelihood_score']:.3f} | |")
    for index, (key, row) in enumerate(rows.items()):
        better = sum(a > b for a, b in zip(first, row["per_prompt_loglik"]))
        versus = f"{better}/{len(first)}" if index else ""
        lines.append(f"| {key.split('(')[0]} | {row['loglik']:.3f} | {row['gap']:.3f} | {row['likelihood_score']:.3f} "
                     f"| {versus} |")
    return "\n".join(lines)
