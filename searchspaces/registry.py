"""Search spaces by name. Registering a name twice or asking for an unknown one raises."""

from __future__ import annotations

import difflib
from typing import Callable

from searchspaces.base import SearchSpace

_SPACES: dict[str, type[SearchSpace]] = {}


def register_search_space(name: str) -> Callable[[type[SearchSpace]], type[SearchSpace]]:
    """Class decorator: make a ``SearchSpace`` subclass available as ``name``."""

    def register(cls: type[SearchSpace]) -> type[SearchSpace]:
        if name in _SPACES:
            raise ValueError(f"search space {name!r} is already registered (by {_SPACES[name].__name__})")
        if not (isinstance(cls, type) and issubclass(cls, SearchSpace)):
            raise TypeError(f"search space {name!r} must be a SearchSpace subclass, got {cls!r}")
        cls.name = name
        _SPACES[name] = cls
        return cls

    return register


def list_search_spaces() -> list[str]:
    """Registered names, sorted."""
    return sorted(_SPACES)


def get_search_space(
    name: str,
    *,
    num_layers: int,
    num_kv_heads: int,
    target: float,
    group_size: int = 8,
    ratio_bounds: tuple[float, float] | None = None,
    min_budget: int = 1,
    max_budget: int | None = None,
) -> SearchSpace:
    """Build the search space ``name``; ``ValueError`` listing the valid names if unknown."""
    if name not in _SPACES:
        valid = ", ".join(list_search_spaces())
        close = difflib.get_close_matches(name, _SPACES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown search space {name!r}{hint}; valid names: {valid}")
    return _SPACES[name](
        num_layers=num_layers,
        num_kv_heads=num_kv_heads,
        target=target,
        group_size=group_size,
        ratio_bounds=ratio_bounds,
        min_budget=min_budget,
        max_budget=max_budget,
    )
