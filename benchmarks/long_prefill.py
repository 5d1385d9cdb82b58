"""What one long prompt costs: the prefill of ONE search-split prompt of a recipe, timed, its record
measured whole and bounded, and this process's peak resident memory.

Before a long-context study is run, its cost follows from three figures: the seconds one prefill
takes, the bytes one record keeps (whole, and bounded at the ``b_max`` a run would use) and the
memory the process peaks at. This prefills one prompt of the recipe's task at its
``task.context_tokens`` with every scorer the recipe's run ranks with (the recipe's and its
baselines'), as a run does (chunked prefill, ``runtime/chunked.py``), and prints one JSON object::

    OMP_NUM_THREADS=1 /usr/bin/time -v python benchmarks/long_prefill.py \\
        results/long-context-8k/recipes/long_context_8k_number.yaml --bounds 2048,4096 --set engine.threads=1

``record_bytes``: the whole record and, per bound, the record cut by ``runtime/bounded.py``
(``kv`` = keys and values only; ``other`` = rankings, scores, logits); ``run_b_max``: the bound the
recipe's own run would use (``pipeline/record_bound.py``). The search split is read, never the
held-out one. Nothing is evaluated: no score is printed.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path


def kv_bytes(record) -> int:
    """Bytes of a record's keys and values (every layer)."""
    return sum(t.numel() * t.element_size() for t in [*record.keys, *record.values])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", type=Path)
    parser.add_argument("--bounds", default="2048", help="b_max values to cut the record at, comma-separated")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="recipe override")
    args = parser.parse_args(argv)

    import torch

    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.runtime.bounded import bound_record
    from evolalloc.runtime.instances import tokenize_instance
    from evolalloc.runtime.prefill import prefill

    recipe = load_recipe(args.recipe, overrides=args.set)
    with Experiment(recipe, progress=False) as experiment:
        started = time.perf_counter()
        loaded = experiment.loaded
        load_seconds = time.perf_counter() - started
        loaded_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        section = recipe.task.search
        (instance,) = experiment.task.instances("search", 1, section.seed, recipe.task.context_tokens,
                                                experiment.tokenizer)
        ids, question = tokenize_instance(loaded.tokenizer, instance, recipe.task.question_after_compression)
        scorers = experiment.scorers
        started = time.perf_counter()
        record = prefill(loaded.model, ids, scorers, uid=instance.uid, question_ids=question)
        prefill_seconds = time.perf_counter() - started
        whole, whole_kv = record.nbytes(), kv_bytes(record)
        bounded = {}
        for b_max in sorted({int(b) for b in args.bounds.split(",") if b.strip()}):
            cut = bound_record(record, b_max)
            bounded[str(b_max)] = {"bytes": cut.nbytes(), "kv": kv_bytes(cut), "other": cut.nbytes() - kv_bytes(cut)}
        geometry = experiment.geometry
        out = {
            "recipe": str(args.recipe),
            "overrides": args.set,
            "task": recipe.task.name,
            "context_tokens": recipe.task.context_tokens,
            "prompt_tokens": int(record.length),
            "threads": torch.get_num_threads(),
            "scorers": [s.key for s in scorers],
            "geometry": {"layers": geometry.num_layers, "kv_heads": geometry.num_kv_heads,
                         "head_dim": geometry.head_dim,
                         "max_positions": geometry.max_positions},
            "model_load_seconds": round(load_seconds, 2),
            "prefill_seconds": round(prefill_seconds, 2),
            "record_bytes": {"whole": whole, "whole_kv": whole_kv, "whole_other": whole - whole_kv, "bounded": bounded},
            "run_b_max": experiment.record_policy.bound,
            "rss_after_model_load_bytes": loaded_rss,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
