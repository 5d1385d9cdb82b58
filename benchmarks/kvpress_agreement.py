"""Does a kvpress export run in kvpress as it ran in evolalloc? Three steps, two venvs.

``benchmarks/kvpress_agreement.sh`` runs them; by hand::

    python benchmarks/kvpress_agreement.py evolalloc-side --allocation A.json --prompts P.jsonl --out E.jsonl
    KVPY benchmarks/kvpress_agreement.py kvpress-side --export A.kvpress.json --evolalloc E.jsonl \
        --model DIR --out K.jsonl
    python benchmarks/kvpress_agreement.py compare E.jsonl K.jsonl

The evolalloc side (evolalloc's venv) tokenizes each prompt, runs ``evolalloc.generate`` with the
question fed after compression (kvpress's pipeline does the same) and records, per layer and KV
head, the positions the runtime keeps. The kvpress side (a venv with kvpress and its own
transformers; this file imports nothing from evolalloc there) loads the *kvpress export*,
builds ``PerLayerCompressionPress(SnapKVPress(...), ratios)`` from it with the snippet of
``evolalloc/export/kvpress.py``, and runs kvpress's own pipeline forward (prefill under the press,
then its greedy ``generate_answer``) on the same token ids; the kept positions are read back
from kvpress's compressed cache by matching its keys against an uncompressed prefill.
``compare`` prints the agreement.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

# kvpress 0.5.5's SnapKVPress defaults (window_size=64, kernel_size=5, avg pooling over the
# prompt before the window) in evolalloc's scorer parameters.
KVPRESS_SNAPKV = {"window": 64, "kernel": 5, "pooling": "avg", "pool_window": False}


def make_profile(args) -> None:
    """A non-uniform per-layer profile (PyramidKV, c=128, the 64-token window outside the pyramid)."""
    import numpy as np

    from evolalloc.core.allocation import Allocation
    from evolalloc.core.allocation_file import save_allocation
    from evolalloc.core.baselines.pyramid import pyramid_layer_budgets
    from evolalloc.runtime.model import load_model

    geometry = load_model(args.model).geometry
    layers = pyramid_layer_budgets(geometry.num_layers, args.target, reserved=KVPRESS_SNAPKV["window"])
    profile = Allocation(model=args.model, geometry=geometry, target=args.target, scorer="snapkv",
                         scorer_params=KVPRESS_SNAPKV,
                         budgets=np.repeat(layers[:, None], geometry.num_kv_heads, axis=1),
                         provenance={"method": "pyramid", "beta": 20, "reserved": KVPRESS_SNAPKV["window"]})
    save_allocation(profile, args.out)
    print(f"profile: PyramidKV c={args.target:g}, per-layer budgets {profile.budgets[:, 0].tolist()} -> {args.out}",
          file=sys.stderr)


def kvpress_exact(args) -> None:
    """The same budgets ranked as kvpress's SnapKVPress ranks (average pooling over the prefix
    only, no sinks), its window and kernel kept: what evolalloc's side runs to check kvpress's
    mechanics exactly on a profile shipped with evolalloc's own SnapKV settings."""
    from dataclasses import replace

    from evolalloc.core.allocation_file import load_allocation, save_allocation

    profile = load_allocation(args.allocation)
    if profile.scorer != "snapkv":
        raise SystemExit(f"error: {args.allocation}: scorer {profile.scorer!r}: kvpress's SnapKVPress only")
    params = {**profile.scorer_params, "sinks": 0, "pooling": "avg", "pool_window": False}
    save_allocation(replace(profile, scorer_params=params), args.out)
    print(f"kvpress-exact: {args.allocation} with scorer params {params} -> {args.out}", file=sys.stderr)


def evolalloc_side(args) -> None:
    import torch

    import evolalloc
    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.prefill import prefill
    from evolalloc.runtime.scorers import get_scorer

    torch.set_num_threads(1)
    loaded = load_model(args.model)
    profile = load_allocation(args.allocation, expect_geometry=loaded.geometry)
    scorer = get_scorer(profile.scorer, **profile.scorer_params)
    rows = [json.loads(line) for line in open(args.prompts, encoding="utf-8") if line.strip()]
    with open(args.out, "w", encoding="utf-8") as out:
        for row in rows:
            pair = (row["context"], row["question"])
            result = evolalloc.generate(loaded.model, loaded.tokenizer, [pair], profile,
                                        max_new_tokens=args.max_new_tokens,
                                        question_after_compression=True)
            context_ids = loaded.tokenizer.encode(row["context"])
            record = prefill(loaded.model, context_ids, [scorer])
            ranking = record.rankings[scorer.key]  # [layers, kv_heads, L]
            kept = [[sorted(ranking[layer, h, : int(result.budgets[0][layer, h])].tolist())
                     for h in range(ranking.shape[1])]
                    for layer in range(ranking.shape[0])]
            out.write(json.dumps({
                "uid": row["uid"], "context_ids": context_ids,
                "question_ids": loaded.tokenizer.encode(row["question"], add_special_tokens=False),
                "references": row.get("references", []), "kept_per_layer": [len(k[0]) for k in kept],
                "kept_positions": kept, "answer": result.texts[0].strip(),
            }) + "\n")
    print(f"evolalloc side: {len(rows)} prompts -> {args.out}", file=sys.stderr)


def use_flash_like_sdpa(model) -> None:
    """kvpress's ``PerLayerCompressionPress`` works with flash attention only (its docstring says
    so): layers then hold different numbers of keys, and flash attention aligns the causal mask
    to the end of each layer's keys, while transformers' SDPA mask is sized for one layer and
    fails on the others. There is no flash attention on CPU, so SDPA gets that same
    bottom-right-aligned causal mask, per layer, and nothing else changes.
    """
    import torch
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    sdpa = ALL_ATTENTION_FUNCTIONS["sdpa"]  # kvpress's patched SDPA

    def flash_like(module, query, key, value, attention_mask, *args, **kwargs):
        q_len, k_len = query.shape[2], key.shape[2]
        mask = None
        if q_len > 1:
            rows = torch.arange(q_len)[:, None] + (k_len - q_len)
            mask = (torch.arange(k_len)[None, :] <= rows)[None, None]
        return sdpa(module, query, key, value, mask, *args, **kwargs)

    AttentionInterface.register("sdpa_bottom_right", flash_like)
    model.set_attn_implementation("sdpa_bottom_right")


def kvpress_side(args) -> None:
    import torch
    from kvpress import PerLayerCompressionPress, SnapKVPress
    from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache, pipeline

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    use_flash_like_sdpa(model)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tokenizer, device="cpu")
    profile = json.load(open(args.export, encoding="utf-8"))
    assert profile["press"]["class"] == "SnapKVPress", profile["press"]
    rows = [json.loads(line) for line in open(args.evolalloc, encoding="utf-8") if line.strip()]
    with open(args.out, "w", encoding="utf-8") as out, torch.no_grad():
        for row in rows:
            context = torch.tensor([row["context_ids"]])
            question = torch.tensor([row["question_ids"]])
            n = context.shape[1]
            # The snippet of evolalloc/export/kvpress.py, as written there:
            ratios = [0.0 if b >= n else 1 - (b + 0.5) / n for b in profile["budgets"]]
            press = PerLayerCompressionPress(press=SnapKVPress(**profile["press"]["kwargs"]), compression_ratios=ratios)
            cache = DynamicCache()
            (answer,) = pipe._forward({"context_ids": context, "questions_ids": [question]},
                                      max_new_tokens=args.max_new_tokens, press=press, cache=cache)
            full = DynamicCache()
            model.model(input_ids=context, past_key_values=full)
            kept = []
            for layer in range(model.config.num_hidden_layers):
                ours, theirs = cache.layers[layer].keys[0], full.layers[layer].keys[0]  # [H, kept, D], [H, n, D]
                kept.append([sorted(torch.cdist(ours[h], theirs[h]).argmin(dim=-1).tolist())
                             for h in range(ours.shape[0])])
            out.write(json.dumps({"uid": row["uid"], "kept_per_layer": [len(k[0]) for k in kept],
                                  "kept_positions": kept,
                                  "answer": answer.strip()}) + "\n")
    print(f"kvpress side: {len(rows)} prompts -> {args.out}", file=sys.stderr)


def compare(args) -> None:
    ours = [json.loads(line) for line in open(args.evolalloc_results, encoding="utf-8")]
    theirs = {r["uid"]: r for r in (json.loads(line) for line in open(args.kvpress_results, encoding="utf-8"))}
    counts_equal = same_sets = heads = answers = correct_ours = correct_theirs = 0
    overlap = []
    differences = []
    for row in ours:
        other = theirs[row["uid"]]
        counts_equal += row["kept_per_layer"] == other["kept_per_layer"]
        for layer_a, layer_b in zip(row["kept_positions"], other["kept_positions"]):
            for a, b in zip(layer_a, layer_b):
                heads += 1
                same_sets += a == b
                overlap.append(len(set(a) & set(b)) / max(len(set(a) | set(b)), 1))
        answers += row["answer"] == other["answer"]
        refs = row.get("references") or []
        correct_ours += any(r in row["answer"] for r in refs)
        correct_theirs += any(r in other["answer"] for r in refs)
        if row["answer"] != other["answer"]:
            differences.append(f"  {row['uid']}: evolalloc {row['answer']!r} vs kvpress {other['answer']!r}")
    n = len(ours)
    print(f"prompts: {n} (context tokens "
          f"{min(len(r['context_ids']) for r in ours)}-{max(len(r['context_ids']) for r in ours)})")
    print(f"kept tokens per layer identical: {counts_equal}/{n} prompts")
    print(f"kept position sets identical: {same_sets}/{heads} (layer, KV head, "
          f"prompt) triples; mean Jaccard {sum(overlap) / len(overlap):.4f}")
    print(f"answers identical: {answers}/{n} ({100 * answers / n:.0f}%)")
    print(f"pass key found: evolalloc {correct_ours}/{n}, kvpress {correct_theirs}/{n}")
    for line in differences:
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    m = sub.add_parser("make-profile")
    m.add_argument("--model", default="bundled:smollm2-135m-instruct")
    m.add_argument("--target", type=float, default=128)
    m.add_argument("--out", required=True)
    x = sub.add_parser("kvpress-exact")
    x.add_argument("--allocation", required=True)
    x.add_argument("--out", required=True)
    a = sub.add_parser("evolalloc-side")
    a.add_argument("--allocation", required=True)
    a.add_argument("--prompts", required=True)
    a.add_argument("--model", default="bundled:smollm2-135m-instruct")
    a.add_argument("--max-new-tokens", type=int, default=8)
    a.add_argument("--out", required=True)
    b = sub.add_parser("kvpress-side")
    b.add_argument("--export", required=True)
    b.add_argument("--evolalloc", required=True, help="the evolalloc side's results (token ids come from there)")
    b.add_argument("--model", required=True, help="a local HF model folder")
    b.add_argument("--max-new-tokens", type=int, default=8)
    b.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("evolalloc_results")
    c.add_argument("kvpress_results")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    {"make-profile": make_profile, "kvpress-exact": kvpress_exact, "evolalloc-side": evolalloc_side,
     "kvpress-side": kvpress_side, "compare": compare}[args.step](args)


if __name__ == "__main__":
    main()
