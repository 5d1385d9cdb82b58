"""Can the full cache do a long-output task at all? Its greedy answers on a few prompts, scored.

Before a search or a headroom grid is built on a task whose answer is long (``repeat_passage``),
the uncompressed model must be able to write that answer: this prefills a few prompts of the task's
search split (whole records), decodes each with every budget at the prompt's length (nothing
evicted) and prints, per prompt, both agreement metrics of the answer against the reference
(``greedy_prefix``, ``token_agreement``, on words), the answer's length and why it stopped::

    OMP_NUM_THREADS=1 python benchmarks/long_output_check.py --task repeat_passage --context-tokens 1024 2048 --n 5

Run under the machine's heavy-work lock (``flock /tmp/evolalloc-heavy.lock``): it loads the model.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import fitness
from evolalloc.runtime.decode import DecodeSettings, eos_ids_of, generate
from evolalloc.runtime.instances import prefill_instances
from evolalloc.runtime.model import load_model
from evolalloc.runtime.scorers import get_scorer
from fitness.metrics.agreement import greedy_prefix, token_agreement


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="repeat_passage")
    parser.add_argument("--param", "-p", action="append", default=[], metavar="KEY=VALUE",
                        help="a task parameter (integers are read as integers)")
    parser.add_argument("--context-tokens", type=int, nargs="+", default=[1024])
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--model", default="bundled:smollm2-135m-instruct")
    parser.add_argument("--batch-size", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    params = {key: int(value) if value.lstrip("-").isdigit() else value
              for key, value in (item.split("=", 1) for item in args.param)}
    task = fitness.get_task(args.task, **params)
    loaded = load_model(args.model)
    scorer = get_scorer("snapkv")
    eos = eos_ids_of(loaded.model, loaded.tokenizer)
    print(task.describe())
    for length in args.context_tokens:
        instances = task.instances("search", args.n, 0, length, loaded.tokenizer)
        records = prefill_instances(loaded, instances, [scorer])
        full = [(r, np.full((r.num_layers, loaded.geometry.num_kv_heads), r.length)) for r in records]
        settings = DecodeSettings(max_new_tokens=instances[0].max_new_tokens, stop=instances[0].stop, eos_ids=eos)
        answers = generate(loaded.model, full, scorer, settings, loaded.tokenizer, args.batch_size)
        rows = []
        for inst, answer in zip(instances, answers):
            text = task.prepare_prediction(inst, answer.text)
            rows.append((greedy_prefix(text, inst.references), token_agreement(text, inst.references)))
            print(f"  {inst.uid}: prompt {inst.metadata.get('context_tokens')} tokens, reference "
                  f"{inst.metadata.get('answer_tokens', '-')} tokens; answer {len(answer.token_ids)} tokens "
                  f"({answer.stopped_by}); greedy_prefix {rows[-1][0]:.3f}, token_agreement {rows[-1][1]:.3f}")
        prefix, agreement = np.mean(rows, axis=0)
        print(f"context {length}: mean greedy_prefix {prefix:.3f}, mean token_agreement {agreement:.3f} "
              f"over {len(rows)} prompts (full cache)")


if __name__ == "__main__":
    main()
