"""One task instance: the prompt (split into context and question), references and decoding limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class Instance:
    """A prompt with its references.

    ``context`` is the part that gets compressed; ``question`` comes after it (it may be fed after
    eviction in a "question after compression" mode) and may be empty. ``prompt`` is always
    ``context + question``. ``uid`` is stable for the same task parameters, split, length, seed and
    index, and unique within a task and split.
    """

    uid: str
    task: str
    split: str
    context: str
    question: str
    references: tuple[str, ...]
    max_new_tokens: int
    stop: tuple[str, ...] = ()
    metadata: Mapping = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        # Frozen all the way down: instances are cached and shared between workers.
        object.__setattr__(self, "references", tuple(self.references))
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "metadata", MappingProxyType({k: _freeze(v) for k, v in self.metadata.items()}))

    @property
    def prompt(self) -> str:
        return self.context + self.question


def _freeze(value):
    """Lists become tuples (recursively), so metadata cannot be changed behind a cache's back."""
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value
