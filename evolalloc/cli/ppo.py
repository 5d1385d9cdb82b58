"""``evolalloc ppo``: train the per-step eviction policy with PPO (paper 003), compare it held out."""

from __future__ import annotations

import json
from pathlib import Path

import click

from evolalloc.cli import main
from evolalloc.cli.options import seed_option
from evolalloc.cli.scorer import _MODEL, _THREADS, _csv, _setup
from evolalloc.core.errors import UserError
from evolalloc.core.paths import resolve_checkpoint
from evolalloc.learned.ppo_settings import PPOSettings

S = PPOSettings  # every default below is the dataclass's


@main.group()
def ppo() -> None:
    """The ppo-policy scorer's network (paper 003: a per-step eviction policy trained with PPO): train -> eval."""


@ppo.command("train")
@click.option("--out", "out_path", default=None, type=click.Path(dir_okay=False),
              help="Checkpoint to write; default: ppo/policy.pt under the cache directory ($EVOLALLOC_CACHE), the one "
                   "the ppo-policy scorer reads when no checkpoint is named. The log goes beside it (.log.jsonl).")
@_MODEL
@click.option("--prompts", default=S.prompts, show_default=True, help="Prose prompts in the training pool.")
@click.option("--prompt-tokens", default=S.prompt_tokens, show_default=True)
@click.option("--continuation", default=S.continuation, show_default=True,
              help="Tokens of the full cache's greedy continuation teacher-forced per episode.")
@click.option("--budgets", default=",".join(map(str, S.budgets)), show_default=True, callback=_csv(int),
              help="Per-(layer, KV head) budgets held while decoding (one drawn per prompt of an update).")
@click.option("--interval", default=S.interval, show_default=True, help="Tokens fed between two evictions.")
@click.option("--prompts-per-update", default=S.prompts_per_update, show_default=True)
@click.option("--rollouts", default=S.rollouts, show_default=True, help="Episodes per prompt (the baseline's group).")
@click.option("--updates", default=S.updates, show_default=True)
@click.option("--epochs", default=S.epochs, show_default=True, help="Clipped-objective passes per update.")
@click.option("--clip", default=S.clip, show_default=True)
@click.option("--lr", default=S.lr, show_default=True)
@click.option("--gamma", default=S.gamma, show_default=True, help="Discount of the per-step rewards.")
@click.option("--entropy", default=S.entropy, show_default=True, help="Weight of the entropy bonus.")
@click.option("--hidden", default=S.hidden, show_default=True)
@click.option("--depth", default=S.depth, show_default=True)
@click.option("--split", type=click.Choice(["search", "heldout"]), default=S.split, show_default=True)
@seed_option(S.seed)
@_THREADS
def train_cmd(out_path, model_spec, threads, **fields):
    """Train on the prose of --split; writes the checkpoint and the reward per update (JSON lines) beside it."""
    settings = PPOSettings(**fields)  # bad values: one line, before the model loads
    _setup(threads)
    from evolalloc.learned.ppo_train import train_ppo
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.policy import model_identity
    from evolalloc.runtime.ppo_network import save_ppo_policy

    out = resolve_checkpoint("ppo", out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    log_path = out.with_suffix(".log.jsonl")
    loaded = load_model(model_spec)
    network, summary = train_ppo(loaded, settings, log_path=log_path)
    save_ppo_policy(out, network, model=model_identity(model_spec, loaded.model), geometry=loaded.geometry.to_dict(),
                    training=summary)
    click.echo(f"trained the ppo policy in {summary['seconds']} s (mean reward {summary['first_reward']:.3f} over the "
               f"first tenth of the updates, {summary['final_reward']:.3f} over the last); wrote {out} and {log_path}")


@ppo.command("eval")
@click.argument("checkpoint")
@_MODEL
@click.option("--baselines", default="h2o,tova,snapkv,streaming", show_default=True, callback=_csv(str),
              help="Scorers to compare with (each at its defaults).")
@click.option("--prompts", default=8, show_default=True, help="Held-out prose prompts.")
@click.option("--prompt-tokens", default=S.prompt_tokens, show_default=True)
@click.option("--continuation", default=S.continuation, show_default=True)
@click.option("--budget", default=64, show_default=True, help="Per-(layer, KV head) budget held while decoding.")
@click.option("--interval", default=S.interval, show_default=True)
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False), help="Write the numbers here.")
@seed_option(0, help="Draws the held-out prompts.")
@_THREADS
def eval_cmd(checkpoint, model_spec, baselines, prompts, prompt_tokens, continuation, budget, interval, json_path,
             seed, threads):
    """Teacher-forced log-likelihood of the full cache's continuation, the policy vs the heuristics."""
    _setup(threads)
    from evolalloc.learned.ppo_eval import heldout_comparison, render
    from evolalloc.runtime.decode_eviction import check_decode_scorer
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.policy import model_identity
    from evolalloc.runtime.scorers import get_scorer

    if not Path(checkpoint).expanduser().is_file():
        raise UserError(f"no ppo policy checkpoint at {checkpoint!r}; train one with `evolalloc ppo train`")
    loaded = load_model(model_spec)
    try:
        policy = get_scorer("ppo-policy", checkpoint=checkpoint)
        policy.check_checkpoint(loaded.geometry.to_dict(), model_identity(model_spec, loaded.model))
        others = [get_scorer(name) for name in baselines]
        for scorer in [policy, *others]:
            check_decode_scorer(scorer)
            if budget < scorer.min_budget:
                raise ValueError(f"--budget {budget} is below the {scorer.min_budget} tokens {scorer.name} "
                                 "always keeps")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    result = heldout_comparison(loaded, policy, others, prompts=prompts, prompt_tokens=prompt_tokens,
                                continuation=continuation, budget=budget, interval=interval, seed=seed)
    click.echo(render(result))
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=1))
        click.echo(f"wrote {json_path}")
