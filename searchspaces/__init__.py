"""How a CMA-ES vector maps to KV-cache budgets and back. A leaf package: plain numpy arrays,
nothing imported from evolalloc."""

from searchspaces.base import SearchSpace
from searchspaces.registry import get_search_space, list_search_spaces, register_search_space

# Imported for their registration side effect; one space per file.
from searchspaces import head_groups as _head_groups  # noqa: E402,F401
from searchspaces import layer_groups as _layer_groups  # noqa: E402,F401

__all__ = ["SearchSpace", "get_search_space", "list_search_spaces", "register_search_space"]
