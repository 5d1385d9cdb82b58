"""Search spaces by name (a ``evolalloc.registry.Registry``). Registering a name twice or asking for an
unknown one raises; a new space is one file in this package (found without any import list).

The spaces over the global top-k were named after the gates whose scores it compares; they are
named for what they search now, and their old names (``SPACE_ALIASES``) still load. So do the old
names of the budget adapters they name (``ADAPTER_ALIASES``, the runtime's registry takes them from
here, and core compares a file's adapter through ``canonical_adapter``).
"""

from __future__ import annotations

from typing import Callable

from evolalloc.registry import Registry
from searchspaces.base import GRANULARITIES, SearchSpace

#: Old search space names -> current ones.
SPACE_ALIASES = {"gate_floors": "floors_under_global_topk", "gate_prior": "score_prior",
                 "gate_prior_heads": "score_prior_heads"}
#: Old names of the budget adapters these spaces name -> current ones.
ADAPTER_ALIASES = {"gate_floors": "floors_under_global_topk", "gate_prior": "score_prior"}
#: Current adapter name -> its old one, for what an old recipe's files keep writing.
OLD_ADAPTER_NAME = {new: old for old, new in ADAPTER_ALIASES.items()}

SEARCH_SPACES: Registry[type[SearchSpace]] = Registry("search space", base=SearchSpace, package="searchspaces",
                                                      aliases=SPACE_ALIASES)


def canonical_adapter(name: str | None) -> str | None:
    """The current name of budget adapter ``name`` (itself unless it is an old name; ``None`` stays)."""
    return ADAPTER_ALIASES.get(name, name) if name is not None else None


def register_search_space(name: str) -> Callable[[type[SearchSpace]], type[SearchSpace]]:
    """Class decorator: make a ``SearchSpace`` subclass available as ``name``.

    The class must declare its ``granularity`` ("layer" or "head"): what an allocation searched
    in it is, and what the run's report draws.
    """

    def register(cls: type[SearchSpace]) -> type[SearchSpace]:
        if getattr(cls, "granularity", None) not in GRANULARITIES:
            raise TypeError(f"search space {name!r} must set granularity to one of {GRANULARITIES}")
        return SEARCH_SPACES.register(name)(cls)

    return register


def list_search_spaces() -> list[str]:
    """Registered names, sorted."""
    return sorted(SEARCH_SPACES.load_all())


def search_space_granularity(name: str) -> str:
    """``"layer"`` or ``"head"``: the granularity space ``name`` declares."""
    return SEARCH_SPACES.get(name).granularity


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
    exact_total: bool = False,
    layer_caps=None,
    **params,
) -> SearchSpace:
    """Build the search space ``name``; ``ValueError`` listing the valid names if unknown.

    ``params``: the space's own settings (``floors_under_global_topk``' ``floor_fraction``); ``ValueError`` for
    one the space does not take. A space asked for by its old name names its adapter by the old name
    too, so an old recipe's profiles record ``provenance.adapter`` as they always did."""
    cls = SEARCH_SPACES.get(name)
    unknown = sorted(set(params) - set(getattr(cls, "params", ())))
    if unknown:
        raise ValueError(f"search space {name!r} takes no {', '.join(unknown)}")
    space = cls(
        num_layers=num_layers,
        num_kv_heads=num_kv_heads,
        target=target,
        group_size=group_size,
        ratio_bounds=ratio_bounds,
        min_budget=min_budget,
        max_budget=max_budget,
        exact_total=exact_total,
        layer_caps=layer_caps,
        **params,
    )
    if name in SPACE_ALIASES and space.adapter in OLD_ADAPTER_NAME:
        space.adapter = OLD_ADAPTER_NAME[space.adapter]
    return space
