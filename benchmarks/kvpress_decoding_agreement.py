"""Does kvpress's DecodingPress hold a decode-time export as evolalloc held it? Two steps, two venvs.

``benchmarks/kvpress_decoding_agreement.sh`` runs them; by hand::

    python benchmarks/kvpress_decoding_agreement.py evolalloc-side --allocation A.json --prompts P.jsonl \
        --new-tokens 96 --out E.pt
    KVPY benchmarks/kvpress_decoding_agreement.py kvpress-side --export A.kvpress-decoding.json --evolalloc E.pt \
        --model DIR

The evolalloc side (evolalloc's venv) prefills each prompt, compresses it to the profile and decodes
``--new-tokens`` greedy tokens holding the budgets (EOS does not stop it: the longer the answer, the
more evictions), then saves the tokens and, per (layer, KV head), the keys and positions it still holds.
The kvpress side (kvpress's venv; nothing of evolalloc is imported there) builds the presses the export
names, prefills the same ids under ``PrefillDecodingPress`` and decodes the same number of steps with
explicit positions (as kvpress's pipeline does), then matches each key kvpress holds to the key evolalloc
holds at the same layer and head (equal within 1e-4): same tokens when every key has its match. It prints
the agreement: answers, and (layer, KV head, prompt) cases whose kept sets are identical.
"""

from __future__ import annotations

import argparse
import json
import sys


def evolalloc_side(args) -> None:
    import torch

    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.runtime.decode import DecodeSettings, build_cache, decode_batch
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.prefill import prefill
    from evolalloc.runtime.scorers import get_scorer

    torch.set_num_threads(1)
    loaded = load_model(args.model)
    profile = load_allocation(args.allocation, expect_geometry=loaded.geometry)
    scorer = get_scorer(profile.scorer, **profile.scorer_params)
    rows = []
    for line in open(args.prompts, encoding="utf-8"):
        if not line.strip():
            continue
        ids = loaded.tokenizer.encode(json.loads(line)["prompt"])
        record = prefill(loaded.model, ids, [scorer])
        _, cache = build_cache(loaded.model, [(record, profile.budgets)], scorer, args.new_tokens, profile.decode)
        (answer,) = decode_batch(loaded.model, cache, [record], DecodeSettings(max_new_tokens=args.new_tokens))
        kept = [(cache.keys[layer][0, :, : cache.used[layer]].clone(), cache.positions[layer][0].clone())
                for layer in range(len(cache.keys))]
        rows.append({"ids": ids, "tokens": answer.token_ids, "kept": kept, "evictions": cache.held.evictions})
        print(f"evolalloc: prompt of {len(ids)} tokens, {len(answer.token_ids)} generated, "
              f"{cache.held.evictions} evictions", file=sys.stderr)
    torch.save({"budget": int(profile.budgets[0, 0]), "interval": profile.decode.interval, "rows": rows}, args.out)


def kvpress_side(args) -> None:
    import kvpress
    import torch
    from transformers import AutoModelForCausalLM, DynamicCache

    torch.set_num_threads(1)
    export = json.load(open(args.export, encoding="utf-8"))
    evolalloc = torch.load(args.evolalloc, weights_only=False)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32, attn_implementation="sdpa").eval()
    doc = export["press"]

    def build(spec, **override):
        return getattr(kvpress, spec["class"])(**{**spec["kwargs"], **override})

    answers = same_sets = cases = 0
    agreed = []  # per prompt, generated tokens before the first that differs
    for row in evolalloc["rows"]:
        ids = torch.tensor([row["ids"]])
        n, budget = ids.shape[1], export["budget"]
        ratio = 0.0 if budget >= n else 1 - (budget + 0.5) / n  # keeps int(n * (1 - ratio)) = budget (export doc)
        press = kvpress.PrefillDecodingPress(
            prefilling_press=build(doc["prefilling_press"], compression_ratio=ratio),
            decoding_press=kvpress.DecodingPress(base_press=build(doc["decoding_press"]["base_press"]),
                                                 **doc["decoding_press"]["kwargs"]))
        cache, tokens = DynamicCache(), []
        with torch.no_grad(), press(model):
            logits = model(input_ids=ids, past_key_values=cache).logits[0, -1]
            for step in range(len(row["tokens"])):
                tokens.append(int(logits.argmax()))
                if step + 1 == len(row["tokens"]):
                    break
                position = torch.tensor([[ids.shape[1] + step]])
                logits = model(input_ids=torch.tensor([[tokens[-1]]]), past_key_values=cache,
                               position_ids=position).logits[0, -1]
        answers += tokens == row["tokens"]
        agreed.append(next((i for i, (a, b) in enumerate(zip(tokens, row["tokens"])) if a != b), len(tokens)))
        for layer, (theirs_keys, positions) in enumerate(row["kept"]):
            ours = cache.layers[layer].keys[0]  # [Hkv, n, D]
            for head in range(ours.shape[0]):
                cases += 1
                distance = torch.cdist(ours[head].double(), theirs_keys[head].double(),
                                       compute_mode="donot_use_mm_for_euclid_dist")  # [n kvpress, n evolalloc]
                matched = distance.min(dim=1).values.max() < 1e-4 and distance.min(dim=0).values.max() < 1e-4
                same_sets += bool(matched and ours.shape[1] == theirs_keys.shape[1])
        print(f"kvpress: {len(tokens)} generated, answer {'identical' if tokens == row['tokens'] else 'differs'}",
              file=sys.stderr)
    from importlib.metadata import version

    print(f"kvpress {version('kvpress')}, transformers {version('transformers')}: budget "
          f"{export['budget']}, interval {export['decode_interval']}, scorer {export['scorer']}: answers identical on "
          f"{answers}/{len(evolalloc['rows'])} prompts (tokens before the first difference: {agreed}), kept sets "
          f"identical in {same_sets}/{cases} (layer, KV head, prompt) cases")


def make_profile(args) -> None:
    """A uniform profile of the bundled model held while decoding (what kvpress's DecodingPress can hold)."""
    import numpy as np

    from evolalloc.core.allocation import Allocation
    from evolalloc.core.allocation_file import save_allocation
    from evolalloc.core.decode_eviction import DecodeEviction
    from evolalloc.runtime.model import load_model

    geometry = load_model(args.model).geometry
    profile = Allocation(model=args.model, geometry=geometry, target=args.budget, scorer=args.scorer,
                         budgets=np.full((geometry.num_layers, geometry.num_kv_heads), args.budget),
                         provenance={"method": "uniform"}, decode=DecodeEviction(args.interval))
    save_allocation(profile, args.out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    ours = sub.add_parser("evolalloc-side")
    ours.add_argument("--allocation", required=True)
    ours.add_argument("--prompts", required=True)
    ours.add_argument("--model", default="bundled:smollm2-135m-instruct")
    ours.add_argument("--new-tokens", type=int, default=96)
    ours.add_argument("--out", required=True)
    make = sub.add_parser("make-profile")
    make.add_argument("--model", default="bundled:smollm2-135m-instruct")
    make.add_argument("--scorer", default="streaming")
    make.add_argument("--budget", type=int, default=64)
    make.add_argument("--interval", type=int, default=8)
    make.add_argument("--out", required=True)
    theirs = sub.add_parser("kvpress-side")
    theirs.add_argument("--export", required=True)
    theirs.add_argument("--evolalloc", required=True)
    theirs.add_argument("--model", required=True)
    args = parser.parse_args()
    {"make-profile": make_profile, "evolalloc-side": evolalloc_side, "kvpress-side": kvpress_side}[args.step](args)


if __name__ == "__main__":
    main()
