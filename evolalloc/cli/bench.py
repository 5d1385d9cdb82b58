"""``evolalloc bench``: benchmarks that print their figures (ratios measured side by side)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from evolalloc.cli import main
from evolalloc.cli.options import model_option, seed_option
from evolalloc.core.errors import UserError


@main.group()
def bench() -> None:
    """Measure evolalloc's speed on this machine; every figure is printed, nothing is assumed."""


@bench.command("eval")
@model_option("model_spec")
@click.option("--prompts", default=8, show_default=True, help="Passkey prompts.")
@click.option("--context-tokens", default=2000, show_default=True, help="Prompt length in model tokens.")
@click.option("--candidates", default=8, show_default=True,
              help="Random allocations at c = 128 evaluated from cached records.")
@click.option("--reprefill-candidates", default=2, show_default=True,
              help="Candidates timed with a fresh prefill each (slow).")
@click.option("--batch-size", default=16, show_default=True, help="Rows decoded per forward.")
@click.option("--threads", type=int, default=None, help="torch threads (default: torch's choice).")
@seed_option()
def bench_eval_cmd(model_spec, prompts, context_tokens, candidates, reprefill_candidates, batch_size, threads, seed):
    """Per-candidate evaluation time: cached prefill records vs re-prefilling, the decode floor,
    and the likelihood fitness mode on the same records and allocations."""
    from evolalloc.bench.eval import bench_eval

    loaded = _model_for_bench(model_spec, threads, shape=True)
    result = bench_eval(loaded, prompts=prompts, context_tokens=context_tokens, candidates=candidates,
                        reprefill_candidates=reprefill_candidates, batch_size=batch_size, seed=seed)
    _echo_lines(result)


@bench.command("gpu")
@click.option("--shape", default="llama-3.1-8b", show_default=True,
              help="A model shape (random weights): llama-3.1-8b, qwen3-8b, tiny-llama, or a path to a config.json.")
@click.option("--layers", type=click.IntRange(min=1), default=None,
              help="Build only the shape's first K layers (a CPU estimate; said loudly).")
@click.option("--device", default=None, help="cuda, cuda:N or cpu (default: cuda when torch sees one).")
@click.option("--dtype", type=click.Choice(["bfloat16", "float16", "float32"]), default="bfloat16", show_default=True)
@click.option("--context", default=8192, show_default=True, type=click.IntRange(min=64),
              help="Prompt length in tokens.")
@click.option("--budget", default=512, show_default=True, type=click.IntRange(min=1),
              help="Mean budget c of the random allocations.")
@click.option("--prompts", default=4, show_default=True, type=click.IntRange(min=1),
              help="Prompts prefilled and decoded.")
@click.option("--candidates", default=8, show_default=True, type=click.IntRange(min=1),
              help="Random allocations timed on cached records.")
@click.option("--reprefill-candidates", default=1, show_default=True, type=click.IntRange(min=1),
              help="Candidates timed with a fresh prefill each (slow).")
@click.option("--new-tokens", default=16, show_default=True, type=click.IntRange(min=2), help="Tokens decoded per row.")
@click.option("--batch-size", default=16, show_default=True, type=click.IntRange(min=1),
              help="Rows decoded per forward.")
@click.option("--instances", default=100, show_default=True, type=click.IntRange(min=1),
              help="Search size the candidates-per-hour estimate is for.")
@click.option("--threads", type=int, default=None, help="torch threads on CPU (default: torch's choice).")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the figures here as JSON.")
@click.option("--profile", "profile_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also profile one batch of (a) and (c) after the timings; the operators' table goes here.")
@seed_option()
def bench_gpu_cmd(shape, layers, device, dtype, context, budget, prompts, candidates, reprefill_candidates, new_tokens,
                  batch_size,
                  instances, threads, json_path, profile_path, seed):
    """What a search costs at a real model's shape (random weights) on this device: per candidate on
    cached records vs re-prefill vs the bare decode floor, prefill speed, record memory."""
    import json

    import torch

    from evolalloc.bench.gpu import GpuBenchSettings, bench_gpu, check_settings
    from evolalloc.bench.gpu_shape import check_shape, load_shape, random_model

    model_shape = load_shape(shape, layers)
    if model_shape.truncated:
        click.echo(model_shape.banner(), err=True)
    if threads:
        torch.set_num_threads(threads)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    settings = GpuBenchSettings(context=context, budget=budget, prompts=prompts, candidates=candidates,
                                reprefill_candidates=reprefill_candidates, new_tokens=new_tokens, batch_size=batch_size,
                                instances=instances, seed=seed)
    check_settings(int(model_shape.config.get("max_position_embeddings") or 0), settings)  # before any weight exists
    check_shape(model_shape, device, dtype)
    loaded = random_model(model_shape, device=device, dtype=dtype, seed=seed)
    result = bench_gpu(loaded, model_shape, settings, log=lambda m: click.echo(m, err=True), profile_path=profile_path)
    _echo_lines(result)
    if json_path is not None:
        json_path.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
        click.echo(f"wrote {json_path}")


@bench.command("fitness")
@model_option("model_spec")
@click.option("--prompts", default=16, show_default=True, help="Passkey prompts.")
@click.option("--context-tokens", default=1000, show_default=True, help="Prompt length in model tokens.")
@click.option("--budgets", default="64,128,512", show_default=True,
              help="Uniform budgets, comma-separated (the full cache is added).")
@click.option("--scorer", "scorer_name", default="snapkv", show_default=True, help="Token scorer.")
@click.option("--batch-size", default=16, show_default=True, help="Rows per forward.")
@click.option("--threads", type=int, default=None, help="torch threads (default: torch's choice).")
@seed_option()
def bench_fitness_cmd(model_spec, prompts, context_tokens, budgets, scorer_name, batch_size, threads, seed):
    """Mean exact-match, graded and likelihood scores against the budget: which fitness has slope."""
    from evolalloc.bench.fitness import bench_fitness

    values = _parse_budgets(budgets)
    loaded = _model_for_bench(model_spec, threads)
    result = bench_fitness(loaded, prompts=prompts, context_tokens=context_tokens, budgets=values,
                           scorer_name=scorer_name, batch_size=batch_size, seed=seed)
    _echo_lines(result)


@bench.command("records")
@model_option("model_spec")
@click.option("--prompts", default=8, show_default=True, help="Passkey prompts.")
@click.option("--context-tokens", default=1000, show_default=True, help="Prompt length in model tokens.")
@click.option("--budgets", default="64,128,256", show_default=True,
              help="Uniform budgets, comma-separated (the largest is b_max).")
@click.option("--batch-size", default=16, show_default=True, help="Rows per forward.")
@click.option("--threads", type=int, default=None, help="torch threads (default: torch's choice).")
@seed_option()
def bench_records_cmd(model_spec, prompts, context_tokens, budgets, batch_size, threads, seed):
    """Record size and scores with records bounded at b_max and kept in float32, bfloat16 or float16."""
    from evolalloc.bench.records import bench_records

    values = _parse_budgets(budgets)
    loaded = _model_for_bench(model_spec, threads)
    result = bench_records(loaded, prompts=prompts, context_tokens=context_tokens, budgets=values,
                           batch_size=batch_size, seed=seed)
    _echo_lines(result)


@bench.command("workers")
@model_option("model_spec")
@click.option("--prompts", default=4, show_default=True, help="Passkey prompts (sharded across the Ray workers).")
@click.option("--context-tokens", default=1000, show_default=True, help="Prompt length in model tokens.")
@click.option("--candidates", default=8, show_default=True, help="Random allocations at c = 128 in the population.")
@click.option("--batch-size", default=16, show_default=True, help="Rows decoded per forward.")
@click.option("--repeats", default=3, show_default=True, help="Timed populations per engine (the best counts).")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16"]), default="float32", show_default=True,
              help="The model's dtype in every engine (on a GPU, bfloat16 is what a search runs).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None,
              help="Where every engine holds the model [default: cuda where there is one]; on a GPU the Ray "
                   "workers share the card.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the figures to this JSON file.")
@seed_option()
def bench_workers_cmd(model_spec, prompts, context_tokens, candidates, batch_size, repeats, dtype, device, json_path,
                      seed):
    """Candidate evaluations per minute: local (1 thread) vs Ray 1 x 1 thread vs Ray 2 x 1 thread."""
    from evolalloc.bench.workers import bench_workers

    result = bench_workers(model_spec, prompts=prompts, context_tokens=context_tokens, candidates=candidates,
                           batch_size=batch_size, repeats=repeats, seed=seed, dtype=dtype, device=device,
                           log=lambda m: click.echo(m, err=True))
    click.echo(f"model: {model_spec}")
    _echo_lines(result)
    if json_path is not None:
        json_path.write_text(json.dumps({"model": model_spec, **result.to_dict()}, indent=2) + "\n")


@bench.command("service")
@click.option("--clients", default=32, show_default=True, help="Concurrent clients.")
@click.option("--seconds", default=30.0, show_default=True, help="How long the clients poll.")
def bench_service_cmd(clients, seconds):
    """Requests/s and latency of a real `evolalloc serve` on loopback: clients polling job status and
    fetching profiles."""
    from evolalloc.bench.service import bench_service

    result = bench_service(clients=clients, seconds=seconds, log=lambda m: click.echo(m, err=True))
    _echo_lines(result)
    if result.errors:
        raise click.ClickException(f"{result.errors} request(s) failed")


@bench.command("asktell")
@click.option("--clients", default=16, show_default=True, help="Concurrent ask/tell clients.")
@click.option("--generations", default=10, show_default=True, help="Generations per group of the benchmark study.")
@click.option("--seconds", default=120.0, show_default=True, help="Upper bound on the clients' run.")
@seed_option()
def bench_asktell_cmd(clients, generations, seconds, seed):
    """Suggest+complete round trips/s of a real `evolalloc serve` on loopback, and the overhead per
    trial against the in-process loop on the same search."""
    from evolalloc.bench.asktell import bench_asktell

    result = bench_asktell(clients=clients, generations=generations, seconds=seconds, seed=seed,
                           log=lambda m: click.echo(m, err=True))
    _echo_lines(result)
    if result.errors:
        raise click.ClickException(f"{result.errors} request(s) failed")


@bench.command("soak")
@click.option("--seconds", default=60.0, show_default=True,
              help="How long the clients run (the goal: 600, memory flat).")
@click.option("--job-clients", default=4, show_default=True,
              help="Clients submitting, polling, cancelling and resuming jobs.")
@click.option("--study-clients", default=4, show_default=True, help="Clients running ask/tell studies.")
@click.option("--generations", default=2, show_default=True, help="Generations per group of each ask/tell study.")
@click.option("--max-queued", default=8, show_default=True,
              help="The service's --max-queued (small: the 429 is exercised).")
@model_option("model_spec")
def bench_soak_cmd(seconds, job_clients, study_clients, generations, max_queued, model_spec):
    """A real `evolalloc serve` on loopback under jobs and ask/tell studies at once for a bounded time:
    requests/s, p99 latency, 5xx count and the service's resident memory at start and end."""
    from evolalloc.bench.soak import bench_soak

    result = bench_soak(seconds=seconds, job_clients=job_clients, study_clients=study_clients, generations=generations,
                        model=model_spec, max_queued=max_queued, log=lambda m: click.echo(m, err=True))
    _echo_lines(result)
    if result.server_errors or result.broken:
        raise click.ClickException(f"{result.server_errors} server error(s), {result.broken} broken connection(s)")


@bench.command("scale")
@model_option("model_spec")
@click.option("--task", "task_name", default="passkey", show_default=True, help="Task whose prompts are prefilled.")
@click.option("--scorer", "scorer_name", default="snapkv", show_default=True, help="Token scorer.")
@click.option("--contexts", default="500,1000", show_default=True,
              help="Prompt lengths (tokens) measured at --instances prompts each, e.g. 1000,2000,4000,8000.")
@click.option("--instances", default=2, show_default=True, type=click.IntRange(min=1), help="Prompts per context cell.")
@click.option("--counts", default="2,4", show_default=True,
              help="Instance counts measured at --count-context tokens, e.g. 50,100,200.")
@click.option("--count-context", default=500, show_default=True, type=click.IntRange(min=1),
              help="Prompt length of the --counts cells.")
@click.option("--extrapolate", "extrapolate_to", default="50,100,200", show_default=True,
              help="Instance counts estimated (labelled so) from the "
                   "measured cell of the largest context; empty: none.")
@click.option("--budgets", default="64,256", show_default=True, help="Mean budgets of the evaluated candidates.")
@click.option("--candidates", default=2, show_default=True, type=click.IntRange(min=1),
              help="Random allocations timed per budget.")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1), help="torch threads per cell.")
@click.option("--batch-size", default=16, show_default=True, type=click.IntRange(min=1),
              help="Rows decoded per forward.")
@click.option("--chunk-size", default=None, type=click.IntRange(min=1),
              help="Prefill chunk (tokens); default: one shot up to 2048 tokens, chunks of 512 beyond.")
@click.option("--whole-records", is_flag=True, help="Keep every token's K/V (no b_max bound), for contrast.")
@click.option("--fit", "fit_size", default="16GiB", show_default=True,
              help="Say which rows' peak fits in this memory size.")
@seed_option()
def bench_scale_cmd(model_spec, task_name, scorer_name, contexts, instances, counts, count_context, extrapolate_to,
                    budgets,
                    candidates, threads, batch_size, chunk_size, whole_records, fit_size, seed):
    """Peak resident memory, prefill seconds per instance and evaluation seconds per candidate,
    against the context and the instance count; each cell measured in a fresh process."""
    from evolalloc.bench.scale import budget_vs_context, fits, parse_sizes, sweep, table
    from evolalloc.bench.scale_cell import CellSettings
    from evolalloc.core.record_settings import parse_size

    context_sizes = parse_sizes(contexts, "--contexts")
    count_sizes = parse_sizes(counts, "--counts")
    targets = parse_sizes(extrapolate_to, "--extrapolate")
    budget_sizes = tuple(_parse_budgets(budgets))
    if not (context_sizes or count_sizes):
        raise UserError("nothing to measure: give --contexts or --counts", field="--contexts")
    try:
        limit = parse_size(fit_size)
    except ValueError as err:
        raise UserError(str(err), field="--fit") from None
    _check_names(task_name, scorer_name)
    base = CellSettings(model=model_spec, task=task_name, scorer=scorer_name, context_tokens=count_context,
                        instances=instances,
                        budgets=budget_sizes, candidates=candidates, threads=threads, batch_size=batch_size,
                        chunk_size=chunk_size, seed=seed, bounded=not whole_records)
    cells = sweep(base, contexts=context_sizes, counts=count_sizes, count_context=count_context, extrapolate_to=targets,
                  log=lambda m: click.echo(m, err=True))
    click.echo(f"model: {model_spec}, task: {task_name}, scorer: {scorer_name}, {threads} torch thread(s) per cell, "
               f"prefill chunk {chunk_size or 'default'}; {candidates} random "
               "candidates per budget; one fresh process per measured cell")
    click.echo("records " + ("whole (--whole-records)" if whole_records else
                             "bounded as a run bounds them: b_max = the largest "
                             "budget any of the cell's candidates gives one unit"))
    for line in table(cells, budget_sizes) + budget_vs_context(cells, budget_sizes) + fits(cells, limit):
        click.echo(line)


def _check_names(task_name: str, scorer_name: str) -> None:
    """Unknown task or scorer names are refused before any cell starts (cheap checks first)."""
    from evolalloc.runtime.scorers import SCORERS, list_scorers
    from fitness import list_tasks

    if task_name not in list_tasks():
        raise UserError(f"unknown task {task_name!r}; choose one of {', '.join(sorted(list_tasks()))}", field="--task")
    if scorer_name not in SCORERS:  # an old name too
        raise UserError(f"unknown scorer {scorer_name!r}; choose one of {', '.join(sorted(list_scorers()))}",
                        field="--scorer")


def _model_for_bench(model_spec: str, threads: int | None, *, shape: bool = False):
    """Load the model with ``threads`` torch threads (``None``: torch's choice) and say what runs."""
    import torch

    from evolalloc.runtime.model import load_model

    if threads:
        torch.set_num_threads(threads)
    loaded = load_model(model_spec)
    geometry = loaded.geometry
    layout = f" ({geometry.num_layers} layers x {geometry.num_kv_heads} KV heads)" if shape else ""
    click.echo(f"model: {model_spec}{layout}, torch threads: {torch.get_num_threads()}")
    return loaded


def _echo_lines(result) -> None:
    for line in result.lines():
        click.echo(line)


def _parse_budgets(text: str) -> list[int]:
    """``--budgets 64,128``: positive whole numbers, at least one; anything else is a ``UserError``."""
    from evolalloc.core.budget_list import parse_budgets

    return parse_budgets(text, "--budgets", whole=True)
