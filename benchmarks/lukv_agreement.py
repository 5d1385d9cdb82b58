"""Does a ``--format lukv`` export keep, in kvpress's ``LUKVPress``, the tokens evolalloc keeps?

``benchmarks/lukv_agreement.sh`` runs the steps; by hand::

    python benchmarks/lukv_agreement.py profile --out DIR                      # curves + lukv allocation
    python -m evolalloc export DIR/allocation-lukv-c128.json --format lukv --context-length N \
        --curves DIR/lukv-curves.npz -o DIR/lukv.npy
    python benchmarks/lukv_agreement.py evolalloc-side --dir DIR --prompts P.jsonl --out E.jsonl
    KVPY benchmarks/lukv_agreement.py kvpress-side --export DIR/lukv.npy --evolalloc E.jsonl \
        --model MODEL_DIR --out K.jsonl
    python benchmarks/lukv_agreement.py compare E.jsonl K.jsonl

``profile`` (evolalloc's venv) profiles LU-KV's utility curves on 8 search instances of passkey
with SnapKV set as kvpress scores (window 64, kernel 5, average pooling of the prefix), the
run's way (``pipeline/lukv.py``), and saves the ``lukv`` allocation at c = 128. The evolalloc side
computes, for each compression ratio, the ``lukv`` method's budgets at ``c = n (1 - ratio)`` from
the curves (``make_baseline("lukv")``, not from the export); for each of 20 prompts it prefills
once, decodes each ratio's evicted cache with the question fed after compression (the runtime's
evaluation path) and records the positions kept per (layer, KV head). The kvpress side (kvpress's
own venv; nothing from evolalloc is imported there) builds
``LUKVPress(SnapKVPress(...), compression_ratio, sink=0, window=0)``, sets its
curves from the exported ``.npy`` (a local file: kvpress downloads curves only for the models it
knows), runs kvpress's pipeline (prefill under the press, then its greedy answer) on the same
token ids, and reads back the pruned positions from each layer's ``masked_key_indices``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

RATIOS = (0.5, 0.75, 0.9)
SNAPKV_AS_KVPRESS = {"window": 64, "kernel": 5, "pooling": "avg", "pool_window": False}


def profile(args) -> None:
    from evolalloc.config.recipe import recipe_from_dict
    from evolalloc.core.allocation_file import save_allocation
    from evolalloc.pipeline.experiment import Experiment

    recipe = recipe_from_dict({
        "model": {"spec": args.model},
        "task": {"name": "passkey", "context_tokens": args.context_tokens, "search": {"n": args.n},
                 "heldout": {"n": 1}},
        "scorer": {"name": "snapkv", "params": SNAPKV_AS_KVPRESS},
        "budget": {"target": args.target, "expansions": []},
        "baselines": ["lukv"],
        "engine": {"threads": 1},
    })
    with Experiment(recipe, progress=False, run_dir=args.out) as experiment:
        allocation = experiment.baseline("lukv", args.target)
    path = save_allocation(allocation, os.path.join(args.out, f"allocation-lukv-c{args.target:g}.json"))
    print(f"profile: lukv curves and {path}", file=sys.stderr)


def evolalloc_side(args) -> None:
    import torch

    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.core.baselines import make_baseline
    from evolalloc.core.baselines.lukv import CURVES_FILE, UtilityCurves
    from evolalloc.export.lukv import lukv_targets
    from evolalloc.runtime.decode import DecodeSettings, eos_ids_of, generate
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.prefill import prefill
    from evolalloc.runtime.scorers import get_scorer

    torch.set_num_threads(1)
    loaded = load_model(args.model)
    source = load_allocation(os.path.join(args.dir, f"allocation-lukv-c{args.target:g}.json"),
                             expect_geometry=loaded.geometry)
    curves = UtilityCurves.load(os.path.join(args.dir, CURVES_FILE))
    scorer = get_scorer(source.scorer, **source.scorer_params)
    rows = [json.loads(line) for line in open(args.prompts, encoding="utf-8") if line.strip()]
    lengths = {len(loaded.tokenizer.encode(row["context"])) for row in rows}
    if len(lengths) != 1:
        sys.exit(f"the prompts have {sorted(lengths)} context tokens; "
                 "LUKVPress's ratios hold for one length: dump them with one")
    (n,) = lengths
    # The method for prompts of n tokens: no head can keep more than the prompt, so the curves
    # stop at n (the longest profiled prompt may be longer; the export caps at n the same way).
    lukv = make_baseline("lukv", curves=UtilityCurves(curves.utility[:, :, : n + 1], curves.floor, curves.meta))
    targets = [lukv_targets(n)[round(100 * ratio) - 1] for ratio in RATIOS]
    allocations = [lukv.allocation(loaded.geometry, target, model=source.model, scorer=source.scorer,
                                   scorer_params=source.scorer_params, reserved=scorer.always_kept)
                   for target in targets]
    settings = DecodeSettings(max_new_tokens=args.max_new_tokens, eos_ids=eos_ids_of(loaded.model, loaded.tokenizer))
    with open(args.out, "w", encoding="utf-8") as out:
        for row in rows:
            # One prefill per prompt serves the three ratios (the evaluation path: compress, then
            # decode with the question fed after compression), as evolalloc evaluate runs it.
            context_ids = loaded.tokenizer.encode(row["context"])
            question_ids = loaded.tokenizer.encode(row["question"], add_special_tokens=False)
            record = prefill(loaded.model, context_ids, [scorer], uid=row["uid"], question_ids=question_ids)
            ranking = record.rankings[scorer.key]  # [layers, kv_heads, L]
            answers = generate(loaded.model, [(record, a.budgets) for a in allocations], scorer, settings,
                               loaded.tokenizer)
            for ratio, target, allocation, answer in zip(RATIOS, targets, allocations, answers):
                budgets = allocation.budgets
                kept = [[sorted(ranking[layer, h, : int(budgets[layer, h])].tolist()) for h in range(ranking.shape[1])]
                        for layer in range(ranking.shape[0])]
                out.write(json.dumps({
                    "uid": row["uid"], "ratio": ratio, "target": target, "context_ids": context_ids,
                                      "question_ids": question_ids,
                    "references": row.get("references", []), "kept_counts": budgets.tolist(), "kept_positions": kept,
                    "answer": answer.text.strip(),
                }) + "\n")
    print(f"evolalloc side: {len(rows)} prompts x {len(RATIOS)} ratios, {n} context tokens -> {args.out}",
          file=sys.stderr)


def kvpress_side(args) -> None:
    import numpy as np
    import torch
    from kvpress import LUKVPress, SnapKVPress
    from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache, pipeline

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tokenizer, device="cpu")
    curves = np.load(args.export)  # the export, from a local file
    meta = json.load(open(os.path.splitext(args.export)[0] + ".json", encoding="utf-8"))
    assert meta["press"]["class"] == "SnapKVPress", meta["press"]
    layers = model.model.layers
    rows = [json.loads(line) for line in open(args.evolalloc, encoding="utf-8") if line.strip()]
    with open(args.out, "w", encoding="utf-8") as out, torch.no_grad():
        for row in rows:
            context, question = torch.tensor([row["context_ids"]]), torch.tensor([row["question_ids"]])
            n = context.shape[1]
            press = LUKVPress(SnapKVPress(**meta["press"]["kwargs"]), compression_ratio=row["ratio"], **meta["lukv"])
            press._budget_curves = curves  # set before the first forward: post_init_from_model then keeps it
            (answer,) = pipe._forward({"context_ids": context, "questions_ids": [question]},
                                      max_new_tokens=args.max_new_tokens, press=press, cache=DynamicCache())
            kept = []
            for layer in layers:
                heads = model.config.num_key_value_heads
                pruned = [set() for _ in range(heads)]
                masked = getattr(layer.self_attn, "masked_key_indices", None)
                if masked is not None:
                    _, head_idx, seq_idx = masked
                    for h, p in zip(head_idx.tolist(), seq_idx.tolist()):
                        pruned[h].add(p)
                kept.append([sorted(set(range(n)) - pruned[h]) for h in range(heads)])
            out.write(json.dumps({"uid": row["uid"], "ratio": row["ratio"],
                                  "kept_counts": [[len(k) for k in layer] for layer in kept],
                                  "kept_positions": kept, "answer": answer.strip()}) + "\n")
    print(f"kvpress side: {len(rows)} (prompt, ratio) rows -> {args.out}", file=sys.stderr)


def compare(args) -> None:
    ours = [json.loads(line) for line in open(args.evolalloc_results, encoding="utf-8")]
    theirs = {(r["uid"], r["ratio"]): r
              for r in (json.loads(line) for line in open(args.kvpress_results, encoding="utf-8"))}
    n_tokens = sorted({len(r["context_ids"]) for r in ours})
    print(f"prompts: {len({r['uid'] for r in ours})} passkey, {n_tokens} "
          "context tokens; LUKVPress(SnapKVPress) vs evolalloc lukv")
    for ratio in sorted({r["ratio"] for r in ours}):
        rows = [r for r in ours if r["ratio"] == ratio]
        counts = sets = triples = answers = found_ours = found_theirs = 0
        overlap = []
        for row in rows:
            other = theirs[(row["uid"], ratio)]
            for la, lb, ca, cb in zip(row["kept_positions"], other["kept_positions"], row["kept_counts"],
                                      other["kept_counts"]):
                for a, b, x, y in zip(la, lb, ca, cb):
                    triples += 1
                    counts += x == y
                    sets += a == b
                    overlap.append(len(set(a) & set(b)) / max(len(set(a) | set(b)), 1))
            answers += row["answer"] == other["answer"]
            refs = row.get("references") or []
            found_ours += any(r in row["answer"] for r in refs)
            found_theirs += any(r in other["answer"] for r in refs)
        print(f"ratio {ratio:g} (c = {rows[0]['target']:g}): kept tokens "
              f"per (layer, KV head) identical {counts}/{triples}; "
              f"kept position sets identical {sets}/{triples}, mean Jaccard {sum(overlap) / len(overlap):.4f}; "
              f"answers identical {answers}/{len(rows)}; pass key found evolalloc "
              f"{found_ours}/{len(rows)}, kvpress {found_theirs}/{len(rows)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("profile")
    p.add_argument("--model", default="bundled:smollm2-135m-instruct")
    p.add_argument("--context-tokens", type=int, default=1000)
    p.add_argument("--n", type=int, default=8, help="search instances profiled")
    p.add_argument("--target", type=float, default=128)
    p.add_argument("--out", required=True)
    a = sub.add_parser("evolalloc-side")
    a.add_argument("--dir", required=True, help="the profile step's folder")
    a.add_argument("--prompts", required=True)
    a.add_argument("--model", default="bundled:smollm2-135m-instruct")
    a.add_argument("--target", type=float, default=128)
    a.add_argument("--max-new-tokens", type=int, default=8)
    a.add_argument("--out", required=True)
    b = sub.add_parser("kvpress-side")
    b.add_argument("--export", required=True, help="the --format lukv .npy (its .json beside it)")
    b.add_argument("--evolalloc", required=True,
                   help="the evolalloc side's results (token ids and ratios come from there)")
    b.add_argument("--model", required=True, help="a local HF model folder")
    b.add_argument("--max-new-tokens", type=int, default=8)
    b.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("evolalloc_results")
    c.add_argument("kvpress_results")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    {"profile": profile, "evolalloc-side": evolalloc_side, "kvpress-side": kvpress_side,
     "compare": compare}[args.step](args)


if __name__ == "__main__":
    main()
