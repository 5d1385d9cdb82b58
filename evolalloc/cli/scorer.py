"""``evolalloc scorer``: trace a corpus, train the learned scorer (KV Policy), evaluate it honestly."""

from __future__ import annotations

import json
from pathlib import Path

import click

from evolalloc.cli import main
from evolalloc.cli.options import model_option, seed_option
from evolalloc.core.errors import UserError
from evolalloc.core.paths import resolve_checkpoint
from evolalloc.learned.settings import TraceSettings, TrainConfig

T, C = TraceSettings, TrainConfig  # every default below is the dataclass's

_MODEL = model_option("model_spec")
_THREADS = click.option("--threads", type=int, default=1, show_default=True,
                        help="torch threads (the machine is shared).")


def _csv(kind):
    return lambda ctx, param, value: tuple(kind(v.strip()) for v in value.split(",") if v.strip())


def _setup(threads: int):
    import torch

    torch.set_num_threads(threads)


def _eval_inputs(command):
    """The checkpoint argument, ``--traces`` and ``--out`` of every held-out evaluation command."""
    command = click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
                           help="Folder for the tables, JSON and plots.")(command)
    command = click.option("--traces", "traces_dir", required=True, type=click.Path(exists=True, file_okay=False),
                           help="Held-out trace folder.")(command)
    return click.argument("checkpoint", type=click.Path(exists=True, dir_okay=False))(command)


def _traces(traces_dir, **kwargs):
    """The trace folder, or one ``UserError`` line saying what is wrong with it."""
    from evolalloc.learned.traces import load_traces

    try:
        return load_traces(traces_dir, **kwargs)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _train_to_checkpoint(kind: str, out_path, traces, fit, save):
    """Train with ``fit(log_path) -> (network, summary)`` and save it with ``save`` at ``out_path``
    (default: the ``kind`` scorer's checkpoint under the cache), the JSONL log beside it, stamped
    with the traces' model and geometry. Returns ``(network, summary, checkpoint, log)``."""
    out = resolve_checkpoint(kind, out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    log_path = out.with_suffix(".log.jsonl")
    network, summary = fit(log_path)
    save(out, network, model=traces.index["model"], geometry=traces.index["geometry"], training=summary)
    return network, summary, out, log_path


@main.group()
def scorer() -> None:
    """The learned per-token scorer: trace -> train -> eval."""


@scorer.command("trace")
@click.argument("out_dir", type=click.Path(file_okay=False))
@_MODEL
@click.option("--tasks", default=",".join(T.tasks), show_default=True, callback=_csv(str),
              help="Comma-separated task names.")
@click.option("--lengths", default=",".join(map(str, T.lengths)), show_default=True, callback=_csv(int),
              help="Comma-separated context lengths (tokens).")
@click.option("--count", default=T.count, show_default=True, help="Prompts in total (spread over tasks x lengths).")
@click.option("--split", type=click.Choice(["search", "heldout"]), default=T.split, show_default=True,
              help="Task split to draw prompts from.")
@click.option("--future", default=T.future, show_default=True,
              help="Future queries whose attention defines importance.")
@click.option("--splits-per-trace", default=T.splits_per_trace, show_default=True,
              help="Split points per prompt (the prompt end is one).")
@click.option("--votes", default=T.votes, show_default=True, type=click.IntRange(min=0),
              help="Also record SnapKV's votes of the last N queries "
                   "before each split (for query-aware gates); 0: none.")
@seed_option(T.seed)
@_THREADS
def trace_cmd(out_dir, model_spec, tasks, lengths, count, split, future, splits_per_trace, votes, seed, threads):
    """Run the model over task prompts and store keys, values and future-attention importance."""
    _setup(threads)
    from evolalloc.learned.traces import TraceSettings, write_traces
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.policy import model_identity

    loaded = load_model(model_spec)
    settings = TraceSettings(tasks=tasks, lengths=lengths, count=count, split=split, seed=seed, future=future,
                             splits_per_trace=splits_per_trace, votes=votes)
    try:
        folder = write_traces(loaded, out_dir, settings, identity=model_identity(model_spec, loaded.model))
    except ValueError as exc:
        raise UserError(str(exc)) from None
    size = sum(p.stat().st_size for p in Path(folder).iterdir()) / 2**20
    click.echo(f"wrote {count} traces to {folder} ({size:.1f} MiB)")


@scorer.command("train")
@click.argument("traces_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--out", "out_path", default=None, type=click.Path(dir_okay=False),
              help="Checkpoint file to write; default: learned/policy.pt under the cache directory ($EVOLALLOC_CACHE), "
                   "the one the `learned` scorer reads when no checkpoint is named.")
@click.option("--steps", default=C.steps, show_default=True)
@click.option("--permutations", default=C.permutations, show_default=True, help="K permutations per step (RLOO group).")
@click.option("--lr", default=C.lr, show_default=True)
@click.option("--warmup", default=C.warmup, show_default=True)
@click.option("--hidden", default=C.hidden, show_default=True)
@click.option("--depth", default=C.depth, show_default=True, help="Hidden layers per MLP.")
@click.option("--max-tokens", type=int, default=C.max_tokens,
              help="Rank a random subset of this many tokens per step (speed).")
@click.option("--sinks", default=C.sinks, show_default=True)
@click.option("--window", default=C.window, show_default=True)
@seed_option(C.seed)
@_THREADS
def train_cmd(traces_dir, out_path, steps, permutations, lr, warmup, hidden, depth, max_tokens, sinks, window, seed,
              threads):
    """Train one MLP per KV head with RLOO; writes the checkpoint and a JSONL log beside it."""
    _setup(threads)
    from evolalloc.learned.train import TrainConfig, train
    from evolalloc.runtime.policy import save_policy

    traces = _traces(traces_dir)
    config = TrainConfig(steps=steps, permutations=permutations, lr=lr, warmup=warmup, hidden=hidden, depth=depth,
                         max_tokens=max_tokens, sinks=sinks, window=window, seed=seed)
    policy, summary, out_path, log_path = _train_to_checkpoint(
        "learned", out_path, traces, lambda log: train(traces, config, log_path=log), save_policy)
    click.echo(f"trained {policy.config.heads} head policies in {summary['seconds']} s "
               f"(final training normalised cost {summary['final_train_cost']:.3f}); wrote {out_path} and {log_path}")


@scorer.command("eval")
@_eval_inputs
@_MODEL
@click.option("--scorers", default="learned,snapkv,h2o,tova,keydiff,knorm,streaming,random", show_default=True,
              callback=_csv(str))
@click.option("--task", default="passkey", show_default=True, help="Downstream task ('' to skip).")
@click.option("--budgets", default="64,128,256", show_default=True, callback=_csv(int),
              help="Downstream uniform budgets.")
@click.option("--seeds", default=5, show_default=True, help="Downstream instance seeds.")
@click.option("--per-seed", default=4, show_default=True, help="Downstream instances per seed.")
@click.option("--context-tokens", default=1024, show_default=True)
@_THREADS
def eval_cmd(checkpoint, traces_dir, out_dir, model_spec, scorers, task, budgets, seeds, per_seed, context_tokens,
             threads):
    """Held-out normalised eviction cost per budget, and downstream scores with 95% intervals."""
    _setup(threads)
    from evolalloc.learned.evaluate import downstream, heldout_costs, plot_costs, render_tables
    from evolalloc.learned.traces import load_traces
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.policy import load_policy, model_identity
    from evolalloc.runtime.scorers import SCORERS, get_scorer

    loaded = load_model(model_spec)
    try:
        load_policy(checkpoint, geometry=loaded.geometry.to_dict(), model=model_identity(model_spec, loaded.model))
        # A scorer that takes a checkpoint gets this one; the others their defaults.
        built = [get_scorer(name, **({"checkpoint": checkpoint} if "checkpoint" in SCORERS.parameters(name) else {}))
                 for name in scorers]
        traces = load_traces(traces_dir, geometry=loaded.geometry.to_dict())
    except ValueError as exc:
        raise UserError(str(exc)) from None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    costs = heldout_costs(loaded, traces, built)
    result = {"checkpoint": checkpoint, "traces": traces_dir, "costs": costs}
    if task:
        result["downstream"] = downstream(loaded, task, built, budgets, seeds=seeds, per_seed=per_seed,
                                          context_tokens=context_tokens)
    (out / "results.json").write_text(json.dumps(result, indent=1))
    plot_costs(costs, out / "eviction-cost.png")
    table = render_tables(result)
    (out / "results.md").write_text(table)
    click.echo(table)
    click.echo(f"wrote {out / 'results.json'}, {out / 'results.md'}, {out / 'eviction-cost.png'}")
