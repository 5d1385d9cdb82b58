"""What a run's search is set up with, before it starts: its ``SearchConfig`` (the recipe's
search space and optimizer on the model's geometry) and a quiet Optuna. Both the start of a run
(``pipeline/start.py``, which opens the trial store before anything is written) and the run
itself (``pipeline/run.py``) need them; here neither has to enter the other.
"""

from __future__ import annotations

from evolalloc.pipeline.experiment import Experiment
from evolalloc.search import SearchConfig


def search_config(experiment: Experiment) -> SearchConfig:
    """The search's settings, on the model's geometry (from its config: no weights needed)."""
    recipe, g = experiment.recipe, experiment.run.model.geometry
    # The study is named after the run, so several runs can share one database URL.
    return SearchConfig.from_sections(target=experiment.resolved.target, search_space=recipe.search_space,
                                      optimizer=recipe.optimizer,
                                      num_layers=g.num_layers, num_kv_heads=g.num_kv_heads,
                                      min_budget=experiment.run.scorers.min_budget, storage=recipe.storage,
                                      study_name=recipe.name,
                                      layer_caps=g.caps() if g.windows else None)


def quiet_optuna() -> None:
    """The study is our storage; its INFO lines ("A new study created") are noise to a user."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
