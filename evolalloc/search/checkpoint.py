"""The search checkpoint: where the loop is and what it knows, written atomically every generation.

It holds the config, the position (group, generation), the optimizer state (which owns its RNG,
see ``optimizers/base.py``) and the best-so-far allocation. The trials themselves live in the
trial store; the two agree because the loop writes a generation's trials *before* its
checkpoint, and on resume re-asks the generation the checkpoint names, taking any trials it
already finds stored.

Written as a pickle via a temporary file in the same folder, ``fsync`` and ``os.replace``, so a
crash leaves either the old checkpoint or the new one, never half a file. It is a pickle: only
resume run folders you wrote yourself.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evolalloc.search.config import SearchConfig
from evolalloc.core.fileio import write_atomic

CHECKPOINT_NAME = "search_checkpoint.pkl"
FORMAT_VERSION = 1


@dataclass
class Checkpoint:
    """Everything ``resume`` needs besides the trial store.

    Attributes:
        group, generation: the next generation to run (``group == n_groups`` when done).
        optimizer_state: ``AskTellOptimizer.state_bytes()`` of the current group's optimizer,
            ``None`` before the group's first generation (it is then built from the seed).
        best_ratios: ``[n_units]`` best-so-far ratios (G* of Algorithm 1).
        best_fitness: F_best, ``-inf`` until a candidate has finished.
    """

    config: SearchConfig
    group: int
    generation: int
    optimizer_state: bytes | None
    best_ratios: np.ndarray
    best_budgets: np.ndarray
    best_fitness: float
    best_task_score: float | None = None
    best_key: tuple[int, int, int] | None = None  # (group, generation, candidate) of the best
    format_version: int = FORMAT_VERSION


def checkpoint_path(run_dir: str | os.PathLike) -> Path:
    return Path(run_dir) / CHECKPOINT_NAME


def save_checkpoint(run_dir: str | os.PathLike, checkpoint: Checkpoint) -> Path:
    """Atomically replace ``<run_dir>/search_checkpoint.pkl``."""
    return write_atomic(checkpoint_path(run_dir), pickle.dumps(checkpoint, protocol=pickle.HIGHEST_PROTOCOL))


def load_checkpoint(run_dir: str | os.PathLike) -> Checkpoint:
    path = checkpoint_path(run_dir)
    with open(path, "rb") as handle:
        checkpoint = pickle.load(handle)
    if not isinstance(checkpoint, Checkpoint) or checkpoint.format_version != FORMAT_VERSION:
        raise ValueError(f"{path}: not a search checkpoint of format {FORMAT_VERSION}")
    return checkpoint
