"""Per-token scorers, one small file each, behind one base class and a registry.

Add a scorer by writing a file with a ``@register_scorer`` dataclass subclass of ``Scorer``.
"""

from __future__ import annotations

import difflib

from evolalloc.runtime.scorers.base import LayerStats, Scorer

_REGISTRY: dict[str, type[Scorer]] = {}


def register_scorer(cls: type[Scorer]) -> type[Scorer]:
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _REGISTRY:
        raise ValueError(f"scorer {cls.name!r} is registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def list_scorers() -> list[str]:
    return sorted(_REGISTRY)


def get_scorer(name: str, **params) -> Scorer:
    """A scorer by name with its parameters; unknown names or parameters raise ``ValueError``."""
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, _REGISTRY, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown scorer {name!r}{hint}; valid scorers: {', '.join(list_scorers())}")
    cls = _REGISTRY[name]
    try:
        scorer = cls(**params)
    except TypeError as exc:
        raise ValueError(f"bad parameters for scorer {name!r}: {exc}") from None
    for key, value in scorer.params().items():
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise ValueError(f"scorer {name!r}: {key} must be >= 0, got {value}")
    return scorer


# Import the scorer files so that they register themselves.
from evolalloc.runtime.scorers import h2o, keydiff, knorm, learned, position, random_rank, snapkv, streaming, tova, window  # noqa: E402,F401

__all__ = ["LayerStats", "Scorer", "get_scorer", "list_scorers", "register_scorer"]
