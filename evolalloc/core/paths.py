"""Where evolalloc keeps what it makes once and re-uses: the cache directory and, under it, the
default checkpoint of each trained scorer. Defined here once; everything else asks.

``EVOLALLOC_CACHE`` moves the whole cache (converted models, checkpoints, scorers trained inside
a run); without it, the user cache directory (``~/.cache/evolalloc`` on Linux).
Torch-free: the recipe checks and the baselines (``core``) need these paths too.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The trained networks' checkpoint kinds (``Scorer.checkpoint_kind``: ``gates`` is the ``retention-gates``
#: scorer's, ``learned`` the learned policy's, ``ppo`` the ``ppo-policy`` scorer's), and their checkpoint's
#: file under the cache directory.
CHECKPOINT_FILES = {"gates": "gates/gates.pt", "learned": "learned/policy.pt", "ppo": "ppo/policy.pt"}
#: What a checkpointed scorer always keeps per head unless its params say otherwise: the first
#: ``sinks`` and the last ``window`` tokens (left out of its training). Read by the scorers and by
#: the ``global-topk`` method, which writes only non-default values into its allocations.
CHECKPOINT_ALWAYS_KEPT = {"sinks": 4, "window": 16}


def cache_dir() -> Path:
    """The cache directory: ``EVOLALLOC_CACHE`` when set, else the user cache directory."""
    env = os.environ.get("EVOLALLOC_CACHE")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("evolalloc"))


def default_checkpoint(scorer: str) -> Path:
    """The checkpoint of kind ``scorer`` ("gates", "learned") a scorer reads when the recipe names none,
    and its training command writes by default."""
    if scorer not in CHECKPOINT_FILES:
        raise ValueError(f"scorer {scorer!r} has no checkpoint; scorers with one: {', '.join(CHECKPOINT_FILES)}")
    return cache_dir() / CHECKPOINT_FILES[scorer]


def resolve_checkpoint(scorer: str, given: str | os.PathLike | None) -> Path:
    """``given`` (``~`` expanded), or the scorer's default checkpoint when ``given`` is empty."""
    return Path(given).expanduser() if given else default_checkpoint(scorer)
