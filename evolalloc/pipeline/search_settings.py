"""What a run's search is set up with, before it starts: its ``SearchConfig`` (the recipe's
search space and optimizer on the model's geometry) and a quiet Optuna. The experiment makes the
settings once (``Experiment.search_config``); the start of a run (``pipeline/start.py``, which opens
the trial store before anything is written), the run itself (``pipeline/run.py``) and the record
bound read them there.
"""

from __future__ import annotations

from evolalloc.search.config import SearchConfig


def search_config(search_space, optimizer, *, target: float, geometry, min_budget: int, storage: str | None,
                  study_name: str, start: tuple[str, ...] = ()) -> SearchConfig:
    """The search's settings: the recipe's ``search_space`` and ``optimizer`` sections at budget ``target``
    on the model's ``geometry`` (from its config: no weights needed), each unit at least ``min_budget``
    (the scorer's); ``storage``: the trial store's URL (None: the run folder's SQLite file);
    ``study_name``: the study's name in it, the run's; ``start``: the methods the search starts from (the
    run's resolved ``optimizer.start``). ``Experiment.search_config`` makes it once per run from the run's pieces."""
    g = geometry
    # The study is named after the run, so several runs can share one database URL.
    return SearchConfig.from_sections(target=target, search_space=search_space, optimizer=optimizer,
                                      num_layers=g.num_layers, num_kv_heads=g.num_kv_heads, min_budget=min_budget,
                                      storage=storage, study_name=study_name,
                                      layer_caps=g.caps() if g.windows else None, start=start)


def quiet_optuna() -> None:
    """The study is our storage; its INFO lines ("A new study created") are noise to a user."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
