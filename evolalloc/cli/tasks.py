"""``evolalloc tasks``: list the registered tasks, or show an example instance of one."""

from __future__ import annotations

from pathlib import Path

import click

from evolalloc.cli import main
from evolalloc.cli.options import model_option, seed_option
from evolalloc.core.errors import UserError

PROMPT_HEAD = 700
PROMPT_TAIL = 500


def _middle_cut(text: str, head: int = PROMPT_HEAD, tail: int = PROMPT_TAIL) -> str:
    """The prompt with its middle left out, so a 4k-token haystack fits on a screen."""
    if len(text) <= head + tail + 60:
        return text
    return f"{text[:head]}\n[... {len(text) - head - tail} characters left out ...]\n{text[-tail:]}"


def _parse_params(pairs: tuple[str, ...]) -> dict:
    """``key=value`` options; values are read as YAML scalars/lists, as in a recipe."""
    import yaml

    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"expected KEY=VALUE, got {pair!r}", field="--param")
        params[key.strip()] = yaml.safe_load(value)
    return params


@main.group("tasks", invoke_without_command=True)
@click.pass_context
def tasks(ctx: click.Context) -> None:
    """List the fitness tasks (one line each: metric, default fitness mode, description);
    `tasks show NAME` prints an example instance."""
    if ctx.invoked_subcommand is not None:
        return
    import fitness
    from fitness.registry import task_class

    names = fitness.list_tasks()
    width = max(map(len, names))
    mode_width = max(len(task_class(name).default_fitness_mode) for name in names)
    for name in names:
        cls = task_class(name)
        metric = cls.metric if name != "longbench" else "per subset"
        click.echo(f"{name:<{width}}  {metric:<16}  {cls.default_fitness_mode:<{mode_width}}  {cls.description}")


@tasks.command("show")
@click.argument("name")
@click.option("--context-tokens", type=click.IntRange(min=1), default=None, help="Prompt length in the model's tokens.")
@click.option("--split", type=click.Choice(["search", "heldout"]), default="search", show_default=True)
@seed_option()
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
              help="A task parameter, e.g. -p needle_type=uuid.")
@model_option(help="Whose tokenizer measures lengths.")
def show(name: str, context_tokens: int | None, split: str, seed: int, params: tuple[str, ...], model: str) -> None:
    """Print one example instance of task NAME: prompt (middle cut), references, metric."""
    import fitness
    from evolalloc.runtime.model import load_tokenizer

    try:
        task = fitness.get_task(name, **_parse_params(params))
        tokenizer = load_tokenizer(model)
        [instance] = task.instances(split, 1, seed, context_tokens, tokenizer)
    except fitness.FitnessError as err:
        # Bad names, parameters and data files are the user's to fix: one line, no traceback.
        raise UserError(str(err)) from None
    click.echo(task.describe())
    click.echo(f"uid: {instance.uid}")
    click.echo(f"metric: {task.metric}   max_new_tokens: {instance.max_new_tokens}   stop: {list(instance.stop)}")
    click.echo(f"graded score: {task.graded_metric or task.metric}   default fitness mode: {task.default_fitness_mode}")
    for key, value in instance.metadata.items():
        click.echo(f"{key}: {value}")
    click.echo("--- prompt (context) ---")
    click.echo(_middle_cut(instance.context))
    click.echo("--- prompt (question) ---")
    click.echo(_middle_cut(instance.question))
    click.echo("--- references ---")
    for reference in instance.references:
        click.echo(f"- {reference}")
    if task.judged_against_full_cache:
        click.echo(f"(none: judged against the full cache's own greedy continuation, {instance.max_new_tokens} tokens)")
    try:
        continuations = task.reference_continuations(instance)
    except fitness.FitnessError as err:
        continuations = ()
        click.echo(f"--- likelihood mode: not available ({err}) ---")
    if continuations:
        click.echo("--- reference continuations (likelihood mode) ---")
        for text in continuations:
            click.echo(f"- {text!r}")


@tasks.command("dump")
@click.argument("name")
@click.option("-n", "count", type=click.IntRange(min=1), default=20, show_default=True, help="How many instances.")
@click.option("--context-tokens", type=click.IntRange(min=1), default=None, help="Prompt length in the model's tokens.")
@click.option("--split", type=click.Choice(["search", "heldout"]), default="heldout", show_default=True)
@seed_option()
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
              help="A task parameter, e.g. -p needle_type=uuid.")
@model_option(help="Whose tokenizer measures lengths.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="JSONL file to write.")
def dump(name, count, context_tokens, split, seed, params, model, output) -> None:
    """Write COUNT instances of task NAME as JSONL, one prompt file line each.

    Each line has uid, context, question, prompt (= context + question), references and
    max_new_tokens: a prompt file for `evolalloc generate`.
    """
    import json

    import fitness
    from evolalloc.core.fileio import write_atomic
    from evolalloc.runtime.model import load_tokenizer

    try:
        task = fitness.get_task(name, **_parse_params(params))
        instances = task.instances(split, count, seed, context_tokens, load_tokenizer(model))
    except fitness.FitnessError as err:
        raise UserError(str(err)) from None
    lines = [json.dumps({"uid": i.uid, "context": i.context, "question": i.question, "prompt": i.prompt,
                         "references": list(i.references), "max_new_tokens": i.max_new_tokens}) for i in instances]
    write_atomic(output, "\n".join(lines) + "\n")
    click.echo(f"wrote {len(lines)} {name} instances to {output}")
