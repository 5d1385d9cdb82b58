"""Anchored gates trained on the answer's likelihood (``scorer.train.objective: answer``, issue 21).

The ``attention`` objective (``learned.gates_train``) makes the gates keep what the next queries
attend to — a stand-in for what we score. This one trains them on what we score: whether the
model still produces the answer from the compressed cache. For a trace cut at the prompt end
(the point where compression happens at inference), one step:

    s         = gates.anchored_score(...)                  [G, m]  G = layers x KV heads, m rankable tokens
    t         = the K-th largest of s over all heads,      K = (c - always_kept) * G   (global top-k)
    r         = sigmoid((s - t) / tau)                     soft "kept"; always-kept tokens r = 1
    loss      = NLL(answer | prompt cache, log r added to the answer's attention logits on the
                prompt's keys, per KV head)  +  penalty * relu(sum r - K) / K

``c`` is drawn per step from ``capacities``; ``uniform_too`` adds the same loss under a per-head
top-k of ``c - always_kept`` (what a uniform allocation keeps). The answer is teacher-forced
through the frozen model on top of the prompt's cached keys and values (``runtime.soft_keep``);
gradients reach only the gates' parameters.

Which answer. The runtime predicts the first answer token from the *full* prefill (SnapKV
compresses after it), so that token carries no signal about the eviction; only the tokens fed
after it do. The task's reference right after the prompt is often one token (12 of 16 common-word
search prompts) and not even what the model writes (SmolLM2 answers ": flute." to "... is"), so
the target is the full cache's own greedy answer (``answer_target``), cut just after the text
contains every reference; when the full cache never gets there within ``answer_tokens``, its
answer of that length (what the compressed model should keep saying). Targets of one token
teach nothing and are left out.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from evolalloc.runtime.gates import RetentionGates
from evolalloc.runtime.soft_keep import fed_logits, prompt_cache


@torch.no_grad()
def answer_target(model, tokenizer, record: dict, prompt_len: int, references, max_tokens: int) -> torch.Tensor:
    """The full cache's greedy answer ``[m]`` (int64) after a traced prompt (module docstring).

    Decoded on the trace's own stored cache (float16 keys and values, as training reads them): the
    prompt's first ``n - 1`` tokens cached, its last token fed to get the first answer token."""
    keys = record["keys"][:, :, : prompt_len - 1].float()
    values = record["values"][:, :, : prompt_len - 1].float()
    ids = record["ids"][:prompt_len].long()
    wanted = [ref.lower() for ref in references]
    produced: list[int] = []
    fed = ids[-1:]
    cache = prompt_cache(keys, values)
    position = prompt_len - 1
    for _ in range(max_tokens):
        out = model(input_ids=fed[None], position_ids=torch.tensor([[position]]), past_key_values=cache, use_cache=True)
        token = int(out.logits[0, -1].argmax())
        produced.append(token)
        if wanted and all(ref in tokenizer.decode(produced).lower() for ref in wanted):
            break
        fed, position = torch.tensor([token]), position + 1
    return torch.tensor(produced, dtype=torch.long)


def soft_top_k(scores: torch.Tensor, kept_per_head: int, uniform: bool, temperature: float) -> tuple[torch.Tensor,
                                                                                                     torch.Tensor, int]:
    """Scores ``[G, m]`` -> ``(log r [G, m], r.sum(), K)`` of a soft top-k keeping ``K`` entries: one
    global threshold over all heads (``K = kept_per_head * G``) or one per head (``uniform``)."""
    heads, m = scores.shape
    per_head = max(1, min(kept_per_head, m))
    if uniform:
        threshold = torch.topk(scores, per_head, dim=-1).values[:, -1:]  # [G, 1]
        allowed = per_head * heads
    else:
        allowed = min(per_head * heads, scores.numel())
        threshold = torch.topk(scores.reshape(-1), allowed).values[-1]
    z = (scores - threshold) / temperature
    return F.logsigmoid(z), torch.sigmoid(z).sum(), allowed


def answer_loss(gates: RetentionGates, model, trace: dict, features, anchor, capacity: int, sinks: int, window: int,
                penalty: float, temperature: float, uniform_too: bool):
    """``(loss, answer NLL (summed over the top-k variants), used / K of the global one)`` of one traced
    prompt (module docstring); ``features``
    ``[G, m, F]`` and ``anchor`` ``[G, m]`` of its rankable tokens ``sinks .. n - window``."""
    n = int(trace["prompt_len"])
    layers, kv_heads = trace["keys"].shape[:2]
    keys = trace["keys"][:, :, :n].float()
    values = trace["values"][:, :, :n].float()
    target = trace["answer_target"].long()
    scores = gates.anchored_score(features, anchor)  # [G, m]
    loss, nll_sum, usage = 0.0, 0.0, []
    for uniform in ([False, True] if uniform_too else [False]):
        log_r, used, allowed = soft_top_k(scores, capacity - sinks - window, uniform, temperature)
        # Always-kept tokens (the sinks and the window) r = 1: log r = 0.
        log_keep = F.pad(log_r, (sinks, window)).view(layers, kv_heads, n)
        with FrozenModel(model):  # the graph reaches the gates only
            logits = fed_logits(model, keys, values, target[:-1], log_keep)  # [m - 1, V]
        nll = F.cross_entropy(logits, target[1:])  # the first token comes from the full prefill
        loss = loss + nll + penalty * torch.relu(used - allowed) / allowed
        nll_sum = nll_sum + nll.detach()
        usage.append(used.detach() / allowed)
    return loss, nll_sum, usage[0]


class FrozenModel:
    """Within the block the model's parameters take no gradient (the loss's backward then reaches
    only the gates' parameters and allocates no ``.grad`` of the model's size); restored after."""

    def __init__(self, model):
        self.model = model
        self.trainable = []

    def __enter__(self):
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        for p in self.trainable:
            p.requires_grad_(False)
        return self.model

    def __exit__(self, *exc):
        for p in self.trainable:
            p.requires_grad_(True)
