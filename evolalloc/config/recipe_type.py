"""The ``Recipe`` type: a validated, resolved run recipe (``recipe.py`` makes one) and what it
derives from its sections: every budget a run reports on, the granularity, its tasks, and the
YAML that is saved in the run folder. The sections themselves are in ``schema.py``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import yaml

from evolalloc.config.schema import RecipeData, TaskEntrySection, TaskSection


@dataclass
class Recipe(RecipeData):
    """A validated, resolved run recipe. ``source`` is where it was read from (not saved)."""

    source = None  # a plain attribute, not a field: it is neither a recipe key nor saved

    @property
    def resolved(self):
        """The ``ResolvedRun`` of this recipe (``config/resolved.py``): what downstream code reads
        (the service's limits, for one) instead of the recipe's budget sections."""
        from evolalloc.config.resolved import resolve_run

        return resolve_run(self)

    @property
    def budgets(self) -> list[int]:
        """The target ``c`` followed by its expansions, or by the rest of ``budget.curve``'s grid:
        every budget a run reports on."""
        if self.budget.curve is not None:
            return [self.budget.target,
                    *(b for b in self.budget.curve.grid(self.budget.target) if b != self.budget.target)]
        return [self.budget.target, *self.budget.expansions]

    @property
    def granularity(self) -> str:
        """``"head"`` when the search space gives each KV head its own budget, else ``"layer"``
        (what the space declares; see ``searchspaces``)."""
        from searchspaces import search_space_granularity  # a leaf package of plain numpy: cheap

        return search_space_granularity(self.search_space.name)

    @property
    def task_entries(self) -> list[TaskEntrySection]:
        """Every task the fitness averages, with weight and label: ``tasks``, or ``task`` alone
        (weight 1, labelled with its name)."""
        if self.tasks is not None:
            return list(self.tasks)
        fields = {f.name: getattr(self.task, f.name) for f in dataclasses.fields(TaskSection)}
        return [TaskEntrySection(**fields, weight=1.0, label=self.task.name)]

    @property
    def multi_task(self) -> bool:
        return self.tasks is not None

    @property
    def task_names(self) -> str:
        """``passkey`` or ``passkey+niah_single``: the task(s) in one word, for provenance and titles."""
        return "+".join(entry.label for entry in self.task_entries)

    def for_task(self, entry: TaskEntrySection) -> "Recipe":
        """This recipe with ``entry`` as its only task: what one task's part of an experiment runs."""
        fields = {f.name: getattr(entry, f.name) for f in dataclasses.fields(TaskSection)}
        single = dataclasses.replace(self, task=TaskSection(**fields), tasks=None)
        single.source = self.source
        return single

    def to_dict(self) -> dict:
        """The resolved recipe as plain YAML-able objects, sections in reading order.

        Of ``task`` and ``tasks`` only the one given is written."""
        data = dataclasses.asdict(self)
        for key in ("task", "tasks"):
            if data[key] is None:
                del data[key]
        return data

    def to_yaml(self) -> str:
        header = "# Resolved evolalloc recipe: defaults + recipe file + --set overrides, as run.\n"
        return header + yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)
