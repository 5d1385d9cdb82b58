"""Limits that keep one request from exhausting or breaking the service.

- Submitted documents (recipes as YAML or JSON): YAML aliases are refused (a few hundred bytes
  of ``&a [*b, *b, ...]`` expand into megabytes before any check runs), and every document is
  capped in nodes and nesting depth, checked while it is read (a deep document is a 422, never
  a ``RecursionError`` and a 500).
- Search sizes: an ask/tell study lives in the service process and a job's worker on the same
  machine, so the cells of a profile (layers x KV heads), the units optimised together (group
  size: CMA-ES costs grow with its square and cube) and a generation's stored budgets
  (population x cells, one JSON row per candidate) are capped.

The numbers are defaults for one machine serving a team; real models are far inside them
(Llama-3-70B: 80 layers x 8 KV heads = 640 cells).
"""

from __future__ import annotations

import json

import yaml

from evolalloc.config.recipe_reading import StrictLoader, parse_yaml
from evolalloc.core.errors import UserError

MAX_DEPTH = 32  # nesting levels of a submitted document (a recipe uses 5)
MAX_NODES = 20_000  # scalars + collections of a submitted document (a recipe has ~100)
MAX_CELLS = 1 << 16  # layers x KV heads of a study's model
MAX_GROUP_SIZE = 256  # units one CMA-ES optimises at once
MAX_POPSIZE = 1000  # candidates per generation
MAX_POPULATION_CELLS = 1 << 20  # popsize x cells: the budgets one generation stores
MAX_BUDGET = 1 << 31  # tokens per cell: targets, expansions, floors and caps (x cells stays exact in a float)


class _BodyLoader(StrictLoader):
    """The recipe loader (safe, duplicate keys refused) without aliases and with node/depth caps."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not accepted in a submitted "
                                              "document; write the value out", mark)
        self._depth = getattr(self, "_depth", 0) + 1
        self._nodes = getattr(self, "_nodes", 0) + 1
        if self._depth > MAX_DEPTH or self._nodes > MAX_NODES:
            mark = self.peek_event().start_mark
            what = f"nested deeper than {MAX_DEPTH} levels" if self._depth > MAX_DEPTH else ("more than "
                                                                                             f"{MAX_NODES} values")
            raise yaml.composer.ComposerError(None, None, f"the document is {what}", mark)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load_yaml(text: str, source: str) -> object:
    return parse_yaml(text, source, loader=_BodyLoader)


def load_json(text: str, source: str) -> object:
    """JSON, refused past the depth and node caps (deep arrays would otherwise recurse)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"not valid JSON: {err.msg}", source=source,
                        field=f"line {err.lineno}, column {err.colno}") from None
    except RecursionError:
        raise UserError(f"the document is nested deeper than {MAX_DEPTH} levels", source=source) from None
    check_shape(data, source)
    return data


def check_shape(data: object, source: str) -> None:
    """``UserError`` if ``data`` (parsed JSON) is nested too deeply or holds too many values."""
    stack, nodes = [(data, 1)], 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if depth > MAX_DEPTH or nodes > MAX_NODES:
            what = f"nested deeper than {MAX_DEPTH} levels" if depth > MAX_DEPTH else f"more than {MAX_NODES} values"
            raise UserError(f"the document is {what}", source=source)
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def check_search_size(*, cells: int | None, group_size: int, popsize: int, source: str,
                      cells_field: str = "geometry") -> None:
    """``UserError`` naming the field if a search is larger than the service runs."""
    if cells is not None and cells > MAX_CELLS:
        raise UserError(f"the model has {cells} cells (layers x KV heads); this service searches at most {MAX_CELLS}",
                        source=source, field=cells_field)
    if group_size > MAX_GROUP_SIZE:
        raise UserError(f"must be <= {MAX_GROUP_SIZE}, got {group_size}", source=source,
                        field="search_space.group_size")
    if popsize > MAX_POPSIZE:
        raise UserError(f"must be <= {MAX_POPSIZE}, got {popsize}", source=source, field="optimizer.popsize")
    if cells is not None and popsize * cells > MAX_POPULATION_CELLS:
        raise UserError(f"{popsize} candidates x {cells} cells = {popsize * cells} budgets a generation; this service "
                        f"stores at most {MAX_POPULATION_CELLS}", source=source, field="optimizer.popsize")
