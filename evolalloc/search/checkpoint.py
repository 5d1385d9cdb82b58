"""The search checkpoint: a small JSON file saying which search this is and how far it got.

The optimizer state is *not* in it. It is a pure function of the seed and the stored trials:
every optimizer is seeded (``optimizers/base.py``) and the trial store holds every finished
evaluation with its parameters and fitness, so ``resume`` rebuilds the state by replaying
ask/tell from the study, checking that each replayed ``ask()`` equals the stored parameters
(``loop.py``). That keeps the run folder free of pickles: a run folder received from someone
else is data, never code (a pickle can run anything when loaded).

The file holds the search config and the next position ``(group, generation)``, written
atomically (``fileio.write_atomic``) after each generation's trials are stored. The position
is a progress marker and a consistency check: the replay must reach at least that far.

``search_checkpoint.pkl`` is the pickle checkpoint of evolalloc before this format; it is
refused, never unpickled (``refuse_legacy``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from evolalloc.core.errors import UserError
from evolalloc.core.fileio import write_atomic
from evolalloc.search.config import SearchConfig

CHECKPOINT_NAME = "search_checkpoint.json"
LEGACY_CHECKPOINT_NAME = "search_checkpoint.pkl"
STUDY_FILE = "study.db"  # the default trial store (SQLite), next to the checkpoint in the run folder
FORMAT = "evolalloc.search_checkpoint"
FORMAT_VERSION = 2  # version 1 was the pickle


@dataclass
class Checkpoint:
    """Which search, and the next generation to run (``group == passes x n_groups`` when done; ``-1``: the
    start's evaluation, before group 0, which is where a search with a start begins).

    ``groups`` (how each finished group ended, ``stopping.GroupSummary.to_dict``) and
    ``start_scores`` (the start's methods and their fitness) are a record for ``show`` and the
    report; a resume rebuilds them from the trials, it never reads them.
    """

    config: SearchConfig
    group: int | None = None  # None: where this config's search begins
    generation: int = 0
    groups: list[dict] = field(default_factory=list)
    start_scores: dict = field(default_factory=dict)
    seconds: float = 0.0  # the search's wall time so far, every session added up (the report's share of the run)

    def __post_init__(self):
        if self.group is None:
            self.group = -1 if self.config.start else 0

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "config": self.config.to_dict(),
                           "group": self.group, "generation": self.generation, "groups": self.groups,
                           "start_scores": self.start_scores, "seconds": round(self.seconds, 3)}, indent=2) + "\n"


def checkpoint_path(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / CHECKPOINT_NAME


def legacy_checkpoint_path(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / LEGACY_CHECKPOINT_NAME


def has_checkpoint(run_dir: str | os.PathLike) -> bool:
    """Whether ``run_dir`` holds a search checkpoint of any format (a search was started there)."""
    return checkpoint_path(run_dir).exists() or legacy_checkpoint_path(run_dir).exists()


def save_checkpoint(run_dir: str | os.PathLike, checkpoint: Checkpoint) -> Path:
    """Atomically replace ``<run_dir>/search_checkpoint.json``."""
    return write_atomic(checkpoint_path(run_dir), checkpoint.to_json())


def recovery_hint(run_dir: str | os.PathLike) -> str:
    return (f"the trial store still holds every finished evaluation: delete this file and run "
            f"`evolalloc resume {run_dir}` again, which rebuilds the search from recipe.yaml and the trial store")


def refuse_legacy(run_dir: str | os.PathLike) -> None:
    """``UserError`` for a pickle checkpoint of an older evolalloc, which is never unpickled."""
    path = legacy_checkpoint_path(run_dir)
    raise UserError(
        "pickle checkpoint of an older evolalloc; not loaded, because unpickling a file can run arbitrary code; "
        + recovery_hint(run_dir),
        source=str(path),
    )


def load_checkpoint(run_dir: str | os.PathLike) -> Checkpoint:
    """Read and check ``search_checkpoint.json``; any damage is a ``UserError`` naming the file and the way out."""
    path = checkpoint_path(run_dir)
    if not path.exists() and legacy_checkpoint_path(run_dir).exists():
        refuse_legacy(run_dir)

    def bad(detail: str, field: str | None = None) -> UserError:
        return UserError(f"corrupt or truncated search checkpoint ({detail}); {recovery_hint(Path(run_dir))}",
                         source=str(path), field=field)

    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise bad(f"not JSON: {err}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise bad("not an evolalloc search checkpoint")
    if data.get("version") != FORMAT_VERSION:
        raise UserError(f"search checkpoint version {data.get('version')!r}; this evolalloc reads version "
                        f"{FORMAT_VERSION}", source=str(path), field="version")
    for key, least in (("group", -1), ("generation", 0)):  # group -1: the start's evaluation
        if not isinstance(data.get(key), int) or isinstance(data.get(key), bool) or data[key] < least:
            raise bad(f"{key} must be an integer >= {least}", field=key)
    raw = data.get("config")
    names = {f.name for f in fields(SearchConfig)}
    if not isinstance(raw, dict) or not names.issuperset(raw) or "num_layers" not in raw:
        raise bad("config is not a search config", field="config")
    if isinstance(raw.get("ratio_bounds"), list):
        raw["ratio_bounds"] = tuple(raw["ratio_bounds"])
    try:
        config = SearchConfig(**raw)
    except (TypeError, ValueError, UserError) as err:
        raise bad(f"config: {err}", field="config") from None
    groups, start_scores, seconds = data.get("groups", []), data.get("start_scores", {}), data.get("seconds", 0.0)
    if not isinstance(groups, list) or not isinstance(start_scores, dict) or not isinstance(seconds, (int, float)):
        raise bad("groups must be a list, start_scores a mapping and seconds a number", field="groups")
    return Checkpoint(config=config, group=data["group"], generation=data["generation"], groups=groups,
                      start_scores=start_scores, seconds=float(seconds))
