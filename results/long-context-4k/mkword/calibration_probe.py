"""What does --plan's calibration miss at 4096 tokens? Time one batch of 4 generate rows, uniform budgets, on:
(a) one record repeated (the plan's way), (b) four clones of it, (c) four distinct instances' records,
(d) the same four spilled to disk and memory-mapped (as a run keeps them), (e) AdaKV / CAKE / gates rows on (d).
Run: PYTHONPATH=/work/main python calib.py  (both cores)."""
import copy, tempfile, time, sys
from pathlib import Path
import numpy as np, torch
from evolalloc.config.recipe import load_recipe
from evolalloc.pipeline.experiment import Experiment
from evolalloc.engine.local import LocalEvaluator
from evolalloc.runtime.instances import tokenize_instance
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.spill import write_spilled, open_spilled

recipe = load_recipe(Path("results/long-context-4k/recipes/long_context_4k_mkword.yaml"))
torch.set_num_threads(2)
with Experiment(recipe, progress=False) as experiment:
    loaded = experiment.run.model.loaded
    label, _, part = experiment.parts[0]
    scorers = experiment.run.scorers.all
    scorer = experiment.run.scorers.scorer
    tok = experiment.run.model.tokenizer
    section = part.splits.section("search")
    insts = part.task.instances("search", 4, section.seed, part.recipe.task.context_tokens, tok)
    records = []
    for inst in insts:
        ids, q = tokenize_instance(tok, inst, part.recipe.task.question_after_compression)
        t = time.perf_counter()
        records.append(prefill(loaded.model, ids, scorers, uid=inst.uid, question_ids=q))
        print(f"prefill {time.perf_counter()-t:.1f} s", flush=True)
    g = loaded.geometry
    tmp = Path(tempfile.mkdtemp(dir="/work/runs-lc4k/calib"))
    spilled = [open_spilled(write_spilled(r, tmp / f"r{i}.safetensors", "k"), "k", verify=False)[0]
               for i, r in enumerate(records)]

    def batch(name, instances, recs, budget, sc=scorer, warm=False):
        ev = LocalEvaluator(loaded, part.task, instances, sc, records=recs, mode="generate", batch_size=4)
        b = [np.full((g.num_layers, g.num_kv_heads), int(budget), dtype=np.int64)]
        if warm:
            ev.evaluate(b)
        t = time.perf_counter()
        (res,) = ev.evaluate(b)
        sec = (time.perf_counter() - t) / 4
        toks = [o.generated_tokens for o in res.instances] if res.ok else res.error
        print(f"{name:34s} c={budget:5d} {sec:.3f} s/row tokens {toks}", flush=True)

    for budget in (128, 256, 512):
        batch("a one record x4", [insts[0]] * 4, [records[0]] * 4, budget, warm=budget == 128)
        batch("b four clones", [insts[0]] * 4, [copy.deepcopy(records[0]) for _ in range(4)], budget)
        batch("c four distinct", insts, records, budget)
        batch("d four distinct, spilled", insts, spilled, budget)
    batch("full: a one record x4", [insts[0]] * 4, [records[0]] * 4, 8192)
    batch("full: d four distinct spilled", insts, spilled, 8192)
    methods = experiment.run.methods
    for name in ("uniform+adakv", "cake", "global-topk"):
        try:
            from evolalloc.pipeline.run_scorers import scorer_for
            a = methods.baseline(name, 128.0)
            ev = LocalEvaluator(loaded, part.task, insts, scorer_for(a), records=spilled, mode="generate", batch_size=4)
            t = time.perf_counter(); (res,) = ev.evaluate([a.budgets]); sec = (time.perf_counter() - t) / 4
            print(f"{name:34s} c=  128 {sec:.3f} s/row tokens {[o.generated_tokens for o in res.instances] if res.ok else res.error}", flush=True)
        except Exception as exc:
            print(name, "failed:", type(exc).__name__, exc)
