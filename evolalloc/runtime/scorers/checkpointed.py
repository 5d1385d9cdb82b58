"""The base of the scorers whose ranking comes from a trained checkpoint (``learned``,
``retention-gates``).

What they share is the file handling, not the model: the checkpoint path is resolved at
construction (so provenance names the file really read, wherever ``EVOLALLOC_CACHE`` points), the
file is loaded on first use and cached per path and modification time (a retrained file is read
again), and the geometry check and the provenance go through the same loader. A subclass names its
``checkpoint_kind`` (the default file under the cache directory, ``core.paths``) and ``_read``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from evolalloc.core.paths import CHECKPOINT_ALWAYS_KEPT, resolve_checkpoint
from evolalloc.runtime.scorers.base import Scorer

# (kind, resolved path, mtime) -> the loaded checkpoint; one per file version, shared by every instance.
_CACHE: dict[tuple[str, str, float], Any] = {}


@dataclass
class CheckpointScorer(Scorer):
    """A query-free scorer reading a checkpoint. ``sinks`` first and ``window`` last tokens are
    always kept (they were left out of training), as for every scorer."""

    checkpoint: str = ""  # "": the default checkpoint under the cache directory (core.paths)
    sinks: int = CHECKPOINT_ALWAYS_KEPT["sinks"]
    window: int = CHECKPOINT_ALWAYS_KEPT["window"]

    #: which default checkpoint ``""`` means (``core.paths.resolve_checkpoint``)
    checkpoint_kind: ClassVar[str] = ""

    def __post_init__(self):
        self.checkpoint = str(resolve_checkpoint(self.checkpoint_kind, self.checkpoint))

    @staticmethod
    def _read(path, geometry: dict | None = None, model: dict | None = None):
        """Load (and, given ``geometry`` / ``model``, check) the file; deferred imports keep the
        registry cheap to import."""
        raise NotImplementedError

    def loaded(self):
        """The checkpoint, read once per file version."""
        resolved = resolve_checkpoint(self.checkpoint_kind, self.checkpoint)
        mtime = resolved.stat().st_mtime if resolved.is_file() else -1.0
        key = (self.checkpoint_kind, str(resolved.resolve()), mtime)
        if key not in _CACHE:
            _CACHE[key] = self._read(resolved)
        return _CACHE[key]

    def check_checkpoint(self, geometry: dict, model: dict | None = None) -> None:
        self._read(self.checkpoint, geometry=geometry, model=model)

    def checkpoint_provenance(self) -> dict:
        from evolalloc.runtime.checkpoint_file import checkpoint_provenance

        return checkpoint_provenance(self.checkpoint)
