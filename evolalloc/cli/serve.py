"""``serve`` (the HTTP service) and its thin clients: ``submit``, ``jobs``, ``profiles``."""

from __future__ import annotations

from pathlib import Path

import click

from evolalloc.cli import main

service_option = click.option("--service", "service", default=None, metavar="URL",
                              help="Service URL (default: $EVOLALLOC_SERVICE or http://127.0.0.1:8700).")
# The operator's job limits (``service/job_limits.py`` holds the defaults and what each means).
LIMIT_HELP = {
    "max_instances": "Most task instances per split a recipe may ask for (task.search.n, task.heldout.n).",
    "max_draws": "Most candidates drawn to curate a split (curate.draw; null = 2n).",
    "max_traces": "Most traces a recipe may train its scorer on (scorer.train.traces).",
    "max_train_steps": "Most scorer training steps (scorer.train.steps).",
    "max_evaluations": "Most evaluations one job plans (groups x generations x population x curve anchors).",
    "max_budgets": "Most budgets a job ships and compares (the target and budget.expansions, or the curve's grid).",
    "max_workers": "Most evaluator processes (engine.workers, Ray actors) one job may start.",
    "max_job_hours": "Wall time of one run of a job; over it the job fails (resume continues it).",
    "max_queued": "Most jobs waiting in the queue; beyond it a submission is a 429 with Retry-After.",
    "max_queued_per_token": "Most jobs waiting per bearer token (where tokens are used).",
    "seconds_per_answer": "Seconds one decoded answer takes here: the rate of a job's estimated duration.",
}


def limit_options(command):
    from evolalloc.service.job_limits import DEFAULTS, OPTIONS

    for name in reversed(list(DEFAULTS)):
        kind = float if isinstance(DEFAULTS[name], float) else int
        command = click.option(OPTIONS[name], name, default=DEFAULTS[name], show_default=True, type=kind,
                               help=LIMIT_HELP[name])(command)
    return command


token_option = click.option("--token-file", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
                            help="File holding the bearer token (default: $EVOLALLOC_SERVICE_TOKEN).")


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; not loopback needs a token.")
@click.option("--port", default=8700, show_default=True, type=int)
@click.option("--runs-dir", default="runs", show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Where run folders go (and, by default, the service database).")
@click.option("--db", "db_url", default=None, metavar="URL",
              help="SQLAlchemy database URL for jobs and profiles (default: SQLite in RUNS_DIR/.service/).")
@click.option("--max-jobs", default=1, show_default=True, type=int, help="Jobs run at once (0: queue only).")
@token_option
@click.option("--max-body", default=1 << 20, show_default=True, type=int, help="Largest request body, in bytes.")
@click.option("--data-root", "data_roots", multiple=True, metavar="DIR",
              help="A folder recipes' task files may come from (repeatable; default: none, built-in tasks only).")
@click.option("--model-root", "model_roots", multiple=True, metavar="DIR",
              help="A folder recipes' model specs may point into (repeatable; default: none, bundled models only).")
@click.option("--ray-address", default=None, metavar="ADDR",
              help="Where jobs with engine.kind ray run: local (default), "
                   "auto or ray://host:port. Recipes cannot choose.")
@click.option("--read-token-file", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="File holding a token every read then needs too (the write token also reads).")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="A Host header name clients use besides the bound address and localhost (repeatable).")
@limit_options
def serve(host, port, runs_dir, db_url, max_jobs, token_file, max_body, data_roots, model_roots, ray_address,
          read_token_file, allowed_hosts, **limits):
    """Run the evolalloc service: search jobs, the profile registry and a web page (open http://HOST:PORT/)."""
    import logging

    import uvicorn

    from evolalloc.service.app import create_app, open_service
    from evolalloc.service.job_limits import JobLimits
    from evolalloc.service.settings import make_settings

    settings = make_settings(runs_dir=runs_dir, db_url=db_url, host=host, port=port, max_jobs=max_jobs,
                             token_file=token_file, max_body_bytes=max_body, data_roots=data_roots,
                             model_roots=model_roots, ray_address=ray_address, read_token_file=read_token_file,
                             allowed_hosts=allowed_hosts, limits=JobLimits(**limits))
    service = open_service(settings)
    from evolalloc.service.redaction import RedactingFormatter

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for handler in logging.getLogger().handlers:  # no URL password in the log either
        handler.setFormatter(RedactingFormatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    click.echo(f"evolalloc service on http://{host}:{port}/ — runs in {settings.runs_dir}, "
               f"max {max_jobs} job(s) at once{', token required for writes' if settings.token else ''}", err=True)
    uvicorn.run(create_app(service), host=host, port=port, log_level="warning", timeout_graceful_shutdown=10)


def _client(service, token_file):
    from evolalloc.service.client import Client
    from evolalloc.service.settings import read_token

    return Client(service, read_token(token_file))


def _call(fn, *args, **kwargs):
    from evolalloc.core.errors import UserError
    from evolalloc.service.client import ServiceError

    try:
        return fn(*args, **kwargs)
    except ServiceError as err:
        raise UserError(str(err), source="service") from None


@main.command()
@click.argument("recipe", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--name", default=None, help="Run name (default: the recipe's name, else the file's stem).")
@service_option
@token_option
def submit(recipe, name, service, token_file):
    """Queue RECIPE as a search job on a service; prints the job id."""
    import yaml

    from evolalloc.config.recipe import read_recipe_file

    text = recipe.read_text(encoding="utf-8")
    data, chain = read_recipe_file(recipe)
    if len(chain) > 1:  # a base: chain is merged here, so the service never reads a file
        text = yaml.safe_dump(data, sort_keys=False)
    if name is None:
        if not (isinstance(data, dict) and data.get("name")):
            name = recipe.stem  # as `evolalloc search` names a run
    job = _call(_client(service, token_file).submit, text, name)
    click.echo(f"job {job['id']} ({job['name']}): {job['status']}")


@main.command()
@click.argument("job_id", required=False, type=int)
@click.option("--cancel", is_flag=True, help="Cancel JOB_ID.")
@service_option
@token_option
def jobs(job_id, cancel, service, token_file):
    """List a service's jobs, or show (or --cancel) one."""
    client = _client(service, token_file)
    if cancel:
        if job_id is None:
            raise click.UsageError("--cancel needs a JOB_ID")
        job = _call(client.cancel, job_id)
        click.echo(f"job {job['id']} ({job['name']}): {job['status']}")
        return
    for job in ([_call(client.job, job_id)] if job_id is not None else _call(client.jobs)):
        planned = job["evaluations_planned"] or "?"
        best = f"{job['best_fitness']:.4f}" if job["best_fitness"] is not None else "-"
        line = (f"{job['id']:>5}  {job['status']:<9}  {job['name']:<24} "
                f"{job['evaluations_done']:>5}/{planned:<5} best {best}")
        if job["status"] == "running" and job.get("phase"):  # e.g. "prefilling 3/20"
            counted = f" {job['phase_done'] or 0}/{job['phase_total']}" if job.get("phase_total") else ""
            line += f"  {job['phase']}{counted}"
        click.echo(line + (f"  error: {job['error']}" if job["error"] else ""))


@main.group()
def profiles():
    """The profile registry of a service."""


@profiles.command("list")
@click.option("--model", default=None)
@click.option("--task", default=None)
@click.option("--scorer", default=None)
@click.option("--granularity", default=None)
@service_option
def profiles_list(model, task, scorer, granularity, service):
    """List registered profiles."""
    for p in _call(_client(service, None).profiles, model=model, task=task, scorer=scorer, granularity=granularity):
        fitness = f"{p['fitness']:.4f}" if p["fitness"] is not None else "-"
        click.echo(f"{p['id']:>5}  c={p['target']:<7g} {p['granularity']:<5} {p['scorer']:<10} {p['task'] or '-':<12} "
                   f"fitness {fitness}  {p['model']}")


@profiles.command("pull")
@click.argument("profile_id", type=int)
@click.option("--budget", type=float, default=None, help="Carry the profile to this average budget.")
@click.option("--format", "fmt", default=None, help="Export format (default: the allocation JSON).")
@click.option("--context-length", type=int, default=None, help="Prompt length, for ratio formats.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Default: stdout.")
@service_option
def profiles_pull(profile_id, budget, fmt, context_length, output, service):
    """Fetch profile PROFILE_ID, expanded and exported as asked."""
    text = _call(_client(service, None).profile, profile_id, budget=budget, fmt=fmt, context_length=context_length)
    if output is None:
        click.echo(text, nl=False)
        return
    from evolalloc.core.fileio import write_atomic

    write_atomic(output, text)
    click.echo(f"wrote {output}")


@main.command()
@service_option
@click.option("--study", "study_id", required=True, type=int, help="Study id on the service.")
@click.option("--recipe", "recipe_path", required=True, type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Recipe saying how to evaluate a profile (model, task, scorer, fitness mode, engine).")
@click.option("--client-id", default=None, help="This worker's name on the service (default: host-pid).")
@click.option("--max-trials", type=int, default=None,
              help="Stop after this many trials (default: until the study ends).")
@token_option
def worker(service, study_id, recipe_path, client_id, max_trials, token_file):
    """Evaluate an ask/tell study's suggestions with evolalloc's runtime until the study ends."""
    from evolalloc.config.recipe import load_recipe
    from evolalloc.service.remote_worker import run_worker

    recipe = load_recipe(recipe_path, ())
    _call(run_worker, _client(service, token_file), study_id, recipe, client_id=client_id, max_trials=max_trials,
          echo=click.echo)
