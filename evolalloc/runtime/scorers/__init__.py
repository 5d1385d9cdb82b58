"""Per-token scorers, one small file each, behind one base class and a registry.

Add a scorer by writing one file in this package with a ``@register_scorer("name")`` dataclass
subclass of ``Scorer`` (the decorator sets its ``name``). Nothing else lists it: the
registry imports the package's files the first time a name is asked for (``evolalloc.registry``).
A renamed scorer's old name still loads (``core/scorer_names.py``: ``gates`` is ``retention-gates``).
"""

from __future__ import annotations

from evolalloc.core.scorer_names import SCORER_ALIASES
from evolalloc.registry import BadParametersError, Registry, UnknownNameError
from evolalloc.runtime.scorers.base import LayerStats, Scorer

SCORERS: Registry[type[Scorer]] = Registry("scorer", base=Scorer, package=__name__, aliases=SCORER_ALIASES)


def register_scorer(name: str):
    """Class decorator: register a ``Scorer`` subclass as ``name`` (which sets its ``name``)."""
    return SCORERS.register(name)


def list_scorers() -> list[str]:
    """Every scorer name (imports the scorer files, which are small: torch is already loaded)."""
    return sorted(SCORERS.load_all())


def get_scorer(name: str, **params) -> Scorer:
    """A scorer by name with its parameters; unknown names or parameters raise ``ValueError``.

    An unknown name is a ``evolalloc.registry.UnknownNameError`` (a ``ValueError``) with did-you-mean.
    """
    try:
        scorer = SCORERS.create(name, **params)
    except UnknownNameError:
        raise
    except BadParametersError as exc:
        raise ValueError(f"bad parameters for scorer {name!r}: {exc}") from None
    if name != scorer.name:
        # Asked for by its old name: it keeps that name, so what it writes (an allocation's scorer, a
        # ranking's key) is what an old recipe always wrote. Compare names via SCORERS.canonical.
        scorer.name = name
    for key, value in scorer.params().items():
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise ValueError(f"scorer {name!r}: {key} must be >= 0, got {value}")
    return scorer


__all__ = ["SCORERS", "LayerStats", "Scorer", "get_scorer", "list_scorers", "register_scorer"]
