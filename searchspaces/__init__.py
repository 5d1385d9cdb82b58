"""How a CMA-ES vector maps to KV-cache budgets and back. A leaf package: plain numpy arrays,
nothing imported from evolalloc. One space per file, registered in ``SEARCH_SPACES``."""

from searchspaces.base import SearchSpace
from searchspaces.registry import (
    SEARCH_SPACES,
    get_search_space,
    list_search_spaces,
    register_search_space,
    search_space_granularity,
)

__all__ = ["SEARCH_SPACES", "SearchSpace", "get_search_space", "list_search_spaces", "register_search_space",
           "search_space_granularity"]
