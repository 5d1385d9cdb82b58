"""The run's own scorer: ``scorer.train`` in a recipe trains gates (or the learned policy) from the
search split.

Which instances: with ``scorer.train.tasks`` (the training mixture), ``traces`` prompts drawn from
the search split of each listed task, shared by weight, independent of the task the run searches
on (``mixture_instances``). Without it, the search split of every task of the recipe (a curated split: its drawn
candidates, which are search instances too; curation itself needs the trained scorer). With
``scorer.train.traces: N``, N of them, shared among the tasks in proportion to their weights
(every task keeps at least one): the training mixture is the recipe's tasks and weights. The
held-out split is never asked for, so no held-out instance can reach the traces.

Where: ``<cache>/trained/<kind>/<key>/`` (``core.paths.cache_dir``, moved by EVOLALLOC_CACHE;
``kind`` the scorer's checkpoint kind, ``gates`` for ``retention-gates`` and its old name alike),
``key`` the sha256 of the training settings, the model (type, weight fingerprint, geometry) and
every chosen instance's text (prompt and references). A second run with the same key re-uses the
checkpoint without tracing or training; a killed one continues (``learned.in_run``).

The checkpoint's path is fixed by the key before training, so the experiment's scorer names it
from the start; ``ensure_trained`` runs before anything ranks tokens with it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from evolalloc.core.errors import UserError
from evolalloc.core.paths import cache_dir

DRAWN = ":drawn"  # the same as pipeline.experiment.DRAWN (the experiment imports this module)


def training_instances(experiment) -> list[tuple[str, object]]:
    """``(task label, instance)`` of the search split that ``scorer.train`` trains on, in a fixed order."""
    train = experiment.recipe.scorer.train
    if train.tasks is not None:
        return mixture_instances(experiment)
    pools = []
    for label, weight, part in experiment.parts:
        split = "search" + DRAWN if part.splits.section("search").curate.active else "search"
        pools.append((label, weight, part.instances(split)))
    if train.traces is None:
        return [(label, inst) for label, _, pool in pools for inst in pool]
    total = sum(weight for _, weight, _ in pools)
    quotas = [max(1, round(train.traces * weight / total)) for _, weight, _ in pools]
    return [(label, inst) for (label, _, pool), quota in zip(pools, quotas) for inst in pool[:quota]]


def mixture_instances(experiment) -> list[tuple[str, object]]:
    """``scorer.train.tasks``: ``traces`` prompts shared among the listed tasks by weight (every
    task at least one), each task's drawn from its own *search* split with its own seed. The
    held-out split of no task is generated, so none of its instances can reach the traces."""
    from fitness import FitnessError, get_task

    train = experiment.recipe.scorer.train
    total = sum(entry.weight for entry in train.tasks)
    chosen = []
    for i, entry in enumerate(train.tasks):
        quota = max(1, round(train.traces * entry.weight / total))
        try:
            task = get_task(entry.name, **entry.params)
            drawn = task.instances("search", quota, entry.seed, entry.context_tokens, experiment.tokenizer)
        except FitnessError as err:
            raise UserError(str(err), source=experiment.recipe.source, field=f"scorer.train.tasks[{i}]") from None
        chosen += [(entry.label, inst) for inst in drawn]
    return chosen


def settings_of(experiment):
    from evolalloc.learned.in_run import InRunSettings
    from evolalloc.runtime.scorers import SCORERS

    recipe, train = experiment.recipe, experiment.recipe.scorer.train
    params = recipe.scorer.params
    capacities = tuple(train.capacities) if train.capacities is not None else experiment.resolved.budgets
    # The network trained is named by its checkpoint kind ("gates", "learned"), whichever name the
    # recipe gives the scorer (retention-gates or its old name): one key, one cached checkpoint.
    kind = SCORERS.get(recipe.scorer.name).checkpoint_kind
    hidden = train.hidden if train.hidden is not None else {"gates": 32, "learned": 256}[kind]
    return InRunSettings(scorer=kind, steps=train.steps, seed=train.seed, future=train.future,
                         splits_per_trace=train.splits_per_trace,
                         min_split=train.min_split, hidden=hidden, horizon=train.horizon, capacities=capacities,
                         checkpoint_every=train.checkpoint_every, sinks=int(params.get("sinks", 4)),
                         window=int(params.get("window", 16)), depth=train.depth, permutations=train.permutations,
                         max_tokens=train.max_tokens, votes=train.votes, anchored=train.anchored,
                         residual=train.residual,
                         objective=train.objective, temperature=train.temperature, uniform_too=train.uniform_too,
                         answer_tokens=train.answer_tokens)


def training_key(settings, identity: dict, geometry: dict, instances: list[tuple[str, object]]) -> str:
    """sha256 of what the trained weights depend on (not the model's path: a copied model matches)."""
    texts = hashlib.sha256()
    for label, inst in instances:
        texts.update(json.dumps([label, inst.prompt, list(inst.references)]).encode())
    content = {"settings": settings.key_fields(), "model_type": identity.get("model_type"),
               "model_fingerprint": identity.get("fingerprint"), "geometry": geometry, "instances": texts.hexdigest()}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


class TrainedScorer:
    """The in-run training of one experiment: its instances, key, folder and checkpoint path."""

    def __init__(self, experiment):
        from evolalloc.runtime.policy import model_identity

        self.experiment = experiment
        self.settings = settings_of(experiment)
        self.instances = training_instances(experiment)
        loaded = experiment.loaded
        self.identity = model_identity(experiment.recipe.model.spec, loaded.model)
        self.key = training_key(self.settings, self.identity, loaded.geometry.to_dict(), self.instances)
        self.folder = cache_dir() / "trained" / self.settings.scorer / self.key[:24]

    @property
    def checkpoint(self) -> Path:
        from evolalloc.learned.in_run import CHECKPOINTS

        return self.folder / CHECKPOINTS[self.settings.scorer]

    def ensure(self, *, progress: bool = True) -> Path:
        """Train unless the checkpoint exists (continuing a killed training); its path."""
        from evolalloc.learned.in_run import train_in_run

        if self.checkpoint.is_file():
            return self.checkpoint
        return train_in_run(self.experiment.loaded, self.identity, self.instances, self.settings, self.folder,
                            provenance={"in_run_key": self.key}, progress=progress)
