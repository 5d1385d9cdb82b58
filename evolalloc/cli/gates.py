"""``evolalloc gates``: train the retention gates (paper 001) on traces, evaluate them held out.

The checkpoint is what the ``retention-gates`` scorer (once ``gates``) and the ``global-topk``
method (one top-k over every head by those scores) read. Traces are the learned scorer's
(``evolalloc scorer trace``); the checkpoint habits are its too.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from evolalloc.cli import main
from evolalloc.cli.options import seed_option
from evolalloc.cli.scorer import _MODEL, _THREADS, _csv, _eval_inputs, _setup, _traces, _train_to_checkpoint
from evolalloc.core.errors import UserError
from evolalloc.core.scorer_names import RETENTION_GATES


@main.group()
def gates() -> None:
    """Retention gates, the checkpoint of the retention-gates scorer and the global-topk method: train -> eval."""


@gates.command("train")
@click.argument("traces_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--out", "out_path", default=None, type=click.Path(dir_okay=False),
              help="Checkpoint to write; default: gates/gates.pt under the cache directory ($EVOLALLOC_CACHE), "
                   "the one the retention-gates scorer and the global-topk method read when no checkpoint is named.")
@click.option("--steps", default=600, show_default=True)
@click.option("--lr", default=3e-3, show_default=True)
@click.option("--hidden", default=32, show_default=True, help="Units of each head's gate before the shared projection.")
@click.option("--horizon", default=32, show_default=True, help="Steps of future utility a score sums (1: myopic).")
@click.option("--capacities", default="64,128,256", show_default=True, callback=_csv(int),
              help="Per-head average budgets trained for (one drawn per step).")
@click.option("--penalty", default=1.0, show_default=True, help="Weight of the global capacity hinge.")
@click.option("--sinks", default=4, show_default=True)
@click.option("--window", default=16, show_default=True)
@click.option("--votes", default=0, show_default=True, type=click.IntRange(min=0),
              help="Query-aware gates: also read SnapKV's votes of the last N "
                   "queries (traces made with --votes N); 0: keys/values only.")
@seed_option()
@_THREADS
def train_cmd(traces_dir, out_path, steps, lr, hidden, horizon, capacities, penalty, sinks, window, votes, seed,
              threads):
    """Train every head's gate and the shared readout; writes the checkpoint and a JSONL log beside it."""
    _setup(threads)
    from evolalloc.learned.gates_train import GatesTrainConfig, train_gates
    from evolalloc.learned.traces import votes_window
    from evolalloc.runtime.gates import save_gates

    traces = _traces(traces_dir)
    if votes and votes_window(traces) != votes:  # checked before anything is written
        raise UserError(f"{traces_dir}: --votes {votes} needs traces recorded "
                        f"with `evolalloc scorer trace --votes {votes}`; "
                        f"these have {votes_window(traces) or 'no'} votes", field="--votes")
    if not capacities or min(capacities) <= sinks + window:
        raise UserError(f"--capacities must all exceed sinks + window ({sinks + window})", field="--capacities")
    config = GatesTrainConfig(steps=steps, lr=lr, hidden=hidden, horizon=horizon, capacities=capacities,
                              penalty=penalty,
                              sinks=sinks, window=window, seed=seed, votes=votes)
    gates_module, summary, out, log_path = _train_to_checkpoint(
        "gates", out_path, traces, lambda log: train_gates(traces, config, log_path=log), save_gates)
    click.echo(f"trained {gates_module.config.heads} gates + 1 shared projection in {summary['seconds']} s "
               f"(final training attention lost {summary['final_attention_lost']:.3f}, retained/capacity "
               f"{summary['final_used_over_capacity']:.2f}); wrote {out} and {log_path}")


@gates.command("eval")
@_eval_inputs
@_MODEL
@click.option("--scorers", default="snapkv,tova,keydiff,knorm,streaming", show_default=True, callback=_csv(str),
              help="Heuristics to compare with (at uniform budgets).")
@click.option("--learned", "learned_checkpoint", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A learned-scorer checkpoint to compare with too.")
@click.option("--budgets", default="64,128,256", show_default=True, callback=_csv(int),
              help="Average budgets c per head.")
@click.option("--profile", "profiles", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Allocation files (e.g. a run's allocation-c128.json) drawn next to the implied budgets.")
@_THREADS
def eval_cmd(checkpoint, traces_dir, out_dir, model_spec, scorers, learned_checkpoint, budgets, profiles, threads):
    """Held-out eviction cost of global-topk vs per-head budgets, the learned scorer and heuristics."""
    _setup(threads)
    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.learned.evaluate import heldout_costs, render_tables
    from evolalloc.learned.gates_eval import global_costs, plot_implied_budgets, render_global
    from evolalloc.learned.traces import load_traces
    from evolalloc.runtime.gates import load_gates
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.policy import model_identity
    from evolalloc.runtime.scorers import get_scorer

    loaded = load_model(model_spec)
    try:
        load_gates(checkpoint, geometry=loaded.geometry.to_dict(), model=model_identity(model_spec, loaded.model))
        gates_scorer = get_scorer(RETENTION_GATES, checkpoint=checkpoint)
        built = [gates_scorer] + [get_scorer(name) for name in scorers]
        if learned_checkpoint:
            built.append(get_scorer("learned", checkpoint=learned_checkpoint))
        traces = load_traces(traces_dir, geometry=loaded.geometry.to_dict())
        drawn = {}
        for path in profiles:
            allocation = load_allocation(path, expect_geometry=loaded.geometry)
            drawn.setdefault(int(allocation.target),
                             {})[f"{allocation.provenance.get('method', 'profile')} ({Path(path).name})"] = \
                allocation.budgets.mean(axis=1).tolist()
    except ValueError as exc:
        raise UserError(str(exc)) from None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    costs = heldout_costs(loaded, traces, built)
    result = {"checkpoint": checkpoint, "traces": traces_dir, "costs": costs,
              "global": global_costs(loaded, traces, gates_scorer, built[1:], budgets)}
    (out / "results.json").write_text(json.dumps(result, indent=1))
    plot_implied_budgets(result["global"], out / "implied-budgets.png", drawn)
    table = render_global(result["global"]) + "\n" + render_tables({"costs": costs})
    (out / "results.md").write_text(table)
    click.echo(table)
    click.echo(f"wrote {out / 'results.json'}, {out / 'results.md'}, {out / 'implied-budgets.png'}")
