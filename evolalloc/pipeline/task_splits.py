"""One task's splits: its instances (generated, or curated from drawn candidates), its curations,
and the prefill records of each split, made once and re-used by every allocation evaluated on it.

``split`` is "search" or "heldout" — curated when the recipe says so — or ``"<split>:drawn"``, the
candidates a curated split is chosen from (``pipeline/curation.py``), or a slice of them,
``"<split>:drawn[start:stop]"``, that curation judges at a time.
"""

from __future__ import annotations

from functools import cached_property

from evolalloc.core.errors import UserError
from evolalloc.core.phases import announce
from evolalloc.pipeline.curation import DRAWN, is_drawn
from evolalloc.runtime.instances import prefill_instances


class TaskSplits:
    """The splits of one task, made from the pieces of the run they need, not from the experiment
    (issue 37: what is handed the recipe is what goes back and forth).

    Args:
        section: the recipe's ``task`` section (``name``, ``params``, ``search``, ``heldout``, ...).
        run: the run's shared pieces (``Experiment.run``): the model, scorers, record keeping, and the
            run folder's ``curation.json`` (``run.curation_file``).
        curate: ``curate(split, drawn) -> Curation``: judges a curated split's drawn candidates with
            the model (``pipeline/curation.py``, through the experiment's evaluators).
        label: the task's label in curations and messages.
        source: the recipe's file, named in errors.
        progress: show progress bars.
    """

    def __init__(self, section, run, curate, *, label: str, source: str | None, progress: bool = True):
        self.task_section, self.run, self._curate = section, run, curate
        self.label, self.source, self.progress = label, source, progress
        self.instances_of: dict[str, list] = {}
        self.records_of: dict[str, list] = {}
        self.curations: dict[str, object] = {}  # split -> Curation

    @cached_property
    def task(self):
        """The task object (``fitness``) the recipe's ``task`` section names, built once."""
        from fitness import FitnessError, get_task

        try:
            return get_task(self.task_section.name, **self.task_section.params)
        except FitnessError as err:
            raise UserError(str(err), source=self.source, field="task") from None

    def section(self, split: str):
        """The recipe section (``n``, ``seed``, ``curate``) of ``split`` ("search" or "heldout")."""
        task = self.task_section
        return task.search if split.partition(DRAWN)[0] == "search" else task.heldout

    def draw(self, splits) -> list[str]:
        """Every instance of ``splits`` that needs no model: a plain split's, and a curated one's drawn
        candidates (the dataset read with the tokenizer only, each instance checked to fit). Returns the
        curated splits, whose candidates are judged with the model later (``instances(split)``)."""
        curated = [split for split in splits if self.section(split).curate.active]
        for split in splits:
            self.instances(split + DRAWN if split in curated else split)  # drawn candidates need no model
        return curated

    def instances(self, split: str) -> list:
        """A split's instances, generated once (generation tokenizes to hit the context length)."""
        if split not in self.instances_of:
            section = self.section(split)
            base, _, piece = split.partition(DRAWN)
            if piece:  # a slice "[start:stop]" of the drawn candidates, judged by curation
                start, stop = (int(i) for i in piece.strip("[]").split(":"))
                self.instances_of[split] = self.instances(base + DRAWN)[start:stop]
            elif is_drawn(split):
                drawn = section.curate.draw or 2 * section.n
                self.instances_of[split] = self.generate(split.removesuffix(DRAWN), drawn)
            elif section.curate.active:
                self.instances_of[split] = self.curated(split)
            else:
                self.instances_of[split] = self.generate(split, section.n)
        return self.instances_of[split]

    def generate(self, split: str, n: int) -> list:
        from fitness import FitnessError

        section = self.section(split)
        try:
            announce("drawing instances")
            instances = self.task.instances(split, n, section.seed, self.task_section.context_tokens,
                                            self.run.model.tokenizer)
        except FitnessError as err:
            raise UserError(str(err), source=self.source, field=f"task.{split}") from None
        self.check_fits(instances)
        return instances

    def curated(self, split: str) -> list:
        from tqdm import tqdm

        from evolalloc.pipeline.curation import load_curation, save_curation

        section = self.section(split)
        drawn = self.instances(split + DRAWN)
        curation_file = self.run.curation_file
        record = load_curation(curation_file, self.label, split, section)
        if record is None:
            record = self._curate(split, drawn)
            save_curation(curation_file, record, section)
            self.discard_unkept(split, set(record.kept_uids))
        by_uid = {inst.uid: inst for inst in drawn}
        missing = [uid for uid in record.kept_uids if uid not in by_uid]
        if missing:
            raise UserError(f"the stored curation keeps instances this task no longer draws, e.g. {missing[0]!r}",
                            source=str(curation_file))
        self.curations[split] = record
        tqdm.write(record.line())
        if not record.kept_uids:
            raise UserError(f"curation kept no instance of the {split} split ({record.line()})",
                            source=self.source, field=f"task.{split}.curate")
        return [by_uid[uid] for uid in record.kept_uids]

    def discard_unkept(self, split: str, kept: set[str]) -> None:
        """Drop the judged candidates of ``split`` that curation did not keep, now (their spilled
        files too, ``RecordKeeper.discard``); the kept ones' records stay for the split."""
        keeper = self.run.records.keeper
        for name in [name for name in self.records_of if is_drawn(name) and name.partition(DRAWN)[0] == split]:
            records = self.records_of[name]
            keeper.discard([r for r in records if r.uid not in kept])
            self.records_of[name] = [r for r in records if r.uid in kept]

    def check_fits(self, instances) -> None:
        """Refuse (``UserError`` on ``task.context_tokens``) an instance beyond the model's positions."""
        from evolalloc.runtime.instances import tokenize_instance
        from evolalloc.runtime.positions import positions_beyond

        model = self.run.model
        limit = model.geometry.max_positions
        if not limit:
            return
        after = self.task_section.question_after_compression
        for instance in instances:
            ids, question = tokenize_instance(model.tokenizer, instance, after)
            needed = positions_beyond(limit, len(ids), len(question or []), instance.max_new_tokens)
            if needed:
                raise UserError(f"instance {instance.uid} needs {needed} positions (prompt and answer), beyond the "
                                f"model's {limit}; choose a shorter context", source=self.source,
                                field="task.context_tokens")

    def records(self, split: str) -> list:
        """Prefill records of a split, made once, holding every scorer's ranking.

        A curated split re-uses the records its drawn candidates already have.
        """
        if split not in self.records_of:
            run = self.run
            instances = self.instances(split)  # a curated split's curation makes its drawn records
            # Drop the drawn candidates' records once the kept ones are picked: ~46 MB each at 1k tokens.
            # Curation may have judged them a slice at a time: every slice of this split's drawn ones.
            slices = [name for name in self.records_of if name.partition(DRAWN)[0] == split and is_drawn(name)]
            drawn = [record for name in slices for record in self.records_of.pop(name)] if slices else None
            if drawn is not None:
                # The drawn records are whole (curation judged the full cache on them): bound the kept ones now.
                keeper = run.records.keeper
                keeper.forget(drawn)
                by_uid = {record.uid: record for record in drawn}
                keys = [s.key for s in run.scorers.all]
                bound = run.records.policy_for(split).bound
                self.records_of[split] = [keeper.keep(by_uid[inst.uid], keys, bound) for inst in instances]
                # A whole drawn file bounded into a new record is read no more: out of the temporary folder now.
                keeper.delete_temporary([by_uid[r.uid] for r in self.records_of[split] if r is not by_uid[r.uid]])
                del drawn, by_uid
                from evolalloc.runtime.heap import give_back

                give_back()  # the drawn records not kept, and the whole ones that were bounded
            else:
                run.scorers.ensure_trained()  # its ranking is in every record
                self.records_of[split] = prefill_instances(
                    run.model.loaded, instances, run.scorers.all,
                    question_after_compression=self.task_section.question_after_compression,
                    progress=self.progress, keeper=run.records.keeper,
                    bound=run.records.policy_for(split).bound,  # None for drawn ones: whole
                    # Drawn candidates are whole and judged once: spilled, so the memory held is
                    # left to the bounded records of the search (issue 22: curation was the peak).
                    hold=not is_drawn(split),
                )
        return self.records_of[split]
