"""Where and how prefill records are kept: bounded, in a chosen precision, in memory or spilled.

``RecordPolicy`` is the small picklable description (an experiment builds it once; a Ray worker
receives it in its spec); ``RecordKeeper`` applies it record by record as they are prefilled:

1. bound the record at ``b_max`` (``runtime/bounded.py``): only K/V some candidate can use;
2. store K/V in ``dtype`` (``engine.record_dtype``; the model still computes in its own);
3. place it: on the model's device while the records fit ``memory`` bytes; beyond that, a GPU
   model's records go to pinned host memory (gathered there and copied to the device per
   batch), a CPU model's are written to ``spill_dir`` (a temporary folder if ``None``, named
   after the process: a killed process's folder is removed by the next one) as
   safetensors (``runtime/spill.py``) and memory-mapped per batch;
4. on a later run over the same folder (``resume``), a spilled record whose content key
   matches is re-used instead of prefilled; a foreign or corrupt file is rebuilt. A record
   spilled to the temporary folder before the run folder existed (a curated split's drawn
   candidate) is moved into ``spill_dir`` when it is kept (``RecordKeeper._refile``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from evolalloc.runtime.bounded import bound_record
from evolalloc.runtime.prefill import PrefillRecord
from evolalloc.runtime.spill import MappedLayers, content_key, open_spilled, release, write_spilled
from evolalloc.runtime.stale_spills import temporary_folder


@dataclass(frozen=True)
class RecordPolicy:
    """How a run keeps its records. ``bound``: ``b_max`` (``None``: full records). ``dtype``:
    ``core.record_settings.RECORD_DTYPES``. ``memory``: bytes of records held in memory (on the
    model's device) before the rest spill (``None``: no limit). ``spill_dir``: the folder spilled
    records go to (``None`` with a limit: a temporary folder, removed at ``close``).
    ``model_id``: names the model in the content key (spec and dtype)."""

    bound: int | None = None
    dtype: str = "float32"
    memory: int | None = None
    spill_dir: str | None = None
    model_id: str = ""

    def unbounded(self) -> "RecordPolicy":
        return replace(self, bound=None)


class RecordKeeper:
    """Applies a ``RecordPolicy`` to the records of one process (an experiment or a Ray worker).

    ``held``: bytes of records kept in memory so far; ``spilled`` / ``reused`` / ``rebuilt``:
    counts, for the progress line and the tests.
    """

    def __init__(self, policy: RecordPolicy):
        self.policy = policy
        self.held = 0
        self.spilled = self.reused = self.rebuilt = 0
        self.notes: list[str] = []
        self._temporary: tempfile.TemporaryDirectory | None = None

    # -- the spill folder ----------------------------------------------------------------------

    def _folder(self) -> Path:
        if self.policy.spill_dir is not None:
            return Path(self.policy.spill_dir)
        if self._temporary is None:
            self._temporary = temporary_folder()  # and removes those of killed processes
        return Path(self._temporary.name)

    def key(self, prompt_ids, question_ids, scorer_keys, bound: int | None) -> str:
        # A bound at or past the prompt's length drops nothing (``bound_record``): such a record is
        # the whole one, so it has the whole one's key (a curated split's drawn record is found again).
        if bound is not None and bound >= len(prompt_ids):
            bound = None
        return content_key(self.policy.model_id, prompt_ids, question_ids, scorer_keys, bound, self.policy.dtype)

    def record_key(self, record: PrefillRecord, scorer_keys, bound: int | None) -> str:
        """``key`` of a record in hand (its prompt and question ids)."""
        question = None if record.question_ids is None else record.question_ids.tolist()
        return self.key(record.prompt_ids.tolist(), question, scorer_keys, bound)

    def path_for(self, key: str) -> Path:
        return self._folder() / f"{key[:32]}.safetensors"

    # -- per record ----------------------------------------------------------------------------

    def reuse(self, prompt_ids, question_ids, scorer_keys, bound: int | None, device=None) -> PrefillRecord | None:
        """A spilled record of this content from an earlier process, or ``None`` (then prefill).

        Only looked for when records spill to a folder of the run (``spill_dir``); a foreign or
        corrupt file is noted and left to be overwritten by the rebuilt record.
        """
        if self.policy.spill_dir is None or self.policy.memory is None:
            return None
        key = self.key(prompt_ids, question_ids, scorer_keys, bound)
        path = self.path_for(key)
        record, why = open_spilled(path, key)
        if record is None:
            if why != "missing":
                self.rebuilt += 1
                self.notes.append(f"spilled record {path.name} is {why}: prefilling it again")
            return None
        self.reused += 1
        self.spilled += 1
        return _small_to(record, device)

    def keep(self, record: PrefillRecord, scorer_keys, bound: int | None, *, hold: bool = True) -> PrefillRecord:
        """``record`` bounded at ``bound`` (``None``: whole), in the policy's dtype, placed.

        ``hold=False``: spill it even when memory is left (with a memory limit; without one it is
        held as always). For whole records that are read once and then dropped — curation's drawn
        candidates: holding them would leave no room for the records used all run long, and it is
        at curation, with a batch of whole rows being decoded, that the main job's memory peaked."""
        given = record
        if isinstance(given.keys, MappedLayers) and (bound is None or bound >= given.length or given.bound == bound) \
                and given.keys[0].dtype == getattr(torch, self.policy.dtype):
            # Already spilled as it should be kept (e.g. a curated split's drawn record): file it where
            # a later process looks for it.
            return self._refile(given, scorer_keys, bound)
        record = bound_record(record, bound) if bound is not None else record
        record = to_record_dtype(record, self.policy.dtype)
        if record is not given:
            release(given)  # a spilled record read whole to be bounded: let its pages go
        size = record.nbytes()
        limit = self.policy.memory
        if limit is None or (hold and self.held + size <= limit):
            self.held += size
            return record
        device = record.first_logits.device
        if device.type == "cuda":
            return pin_on_host(record)  # a GPU's records beyond the limit: pinned host memory, not disk
        # Keyed by the bound asked for (a prompt shorter than it stays whole, yet must be found again).
        key = self.record_key(record, scorer_keys, bound)
        path = write_spilled(record, self.path_for(key), key)
        # Just written from the record in hand: format, key and size are checked, the digest is
        # not hashed a second time (it is on the next process's ``reuse``).
        spilled, why = open_spilled(path, key, verify=False)
        if spilled is None:  # the disk lied to us: keep it in memory rather than lose it
            self.notes.append(f"spilled record {path.name} did not read back ({why}); kept in memory")
            self.held += size
            return record
        self.spilled += 1
        return _small_to(spilled, device)

    def _refile(self, record: PrefillRecord, scorer_keys, bound: int | None) -> PrefillRecord:
        """A spilled ``record`` kept as it is, moved from the temporary folder into ``spill_dir``.

        A curated split's drawn records are spilled before the run folder exists, into a temporary
        folder; the kept ones are moved to the run folder's ``records/`` once it is the spill
        folder, so ``resume`` finds them (same content, same key: see ``key``) and a hard kill
        leaves them there, not in the temporary folder. The file's bytes are unchanged.
        """
        if self.policy.spill_dir is None or self._temporary is None:
            return record
        old = Path(record.keys.mapping.path)
        if old.parent != Path(self._temporary.name):
            return record  # already in a folder of the run
        key = self.record_key(record, scorer_keys, bound)
        path = self.path_for(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(old, path)  # same file system: a rename
        except OSError:  # another file system: copy beside the target, then rename (a kill leaves no half file)
            partial = path.with_name(path.name + ".partial")
            shutil.copyfile(old, partial)
            os.replace(partial, path)
            old.unlink(missing_ok=True)
        # keys and values share one mapping, opened lazily: later batches map the moved file.
        record.keys.mapping.release()
        record.keys.mapping.path = path
        return record

    def forget(self, records) -> None:
        """Records dropped by their owner: their memory no longer counts against the limit."""
        for record in records:
            if not isinstance(record.keys, MappedLayers):
                self.held = max(0, self.held - record.nbytes())

    def discard(self, records) -> None:
        """Records dropped for good (curation's drawn candidates it did not keep): forgotten, and a
        spilled one's file in the temporary folder deleted now rather than when the run ends, so a
        run killed after curation leaves no whole records behind there (~46 MB each at 1k tokens)."""
        self.forget(records)
        self.delete_temporary(records)

    def delete_temporary(self, records) -> None:
        """Delete the temporary-folder files of spilled records no one reads any more (unmapped first)."""
        temporary = Path(self._temporary.name) if self._temporary is not None else None
        for record in records:
            if isinstance(record.keys, MappedLayers):
                release(record)
                path = Path(record.keys.mapping.path)
                if temporary is not None and path.parent == temporary:
                    path.unlink(missing_ok=True)

    def close(self) -> None:
        if self._temporary is not None:
            self._temporary.cleanup()
            self._temporary = None


def to_record_dtype(record: PrefillRecord, dtype: str) -> PrefillRecord:
    """K/V stored in ``dtype``; ``compute_dtype`` remembers the model's so compression casts back."""
    target = getattr(torch, dtype)
    if record.keys[0].dtype == target:
        return record
    return replace(record, keys=[k.to(target) for k in record.keys], values=[v.to(target) for v in record.values],
                   compute_dtype=record.compute_dtype or record.keys[0].dtype)


def pin_on_host(record: PrefillRecord) -> PrefillRecord:
    """K/V in pinned host memory (fast, asynchronous copies to the GPU); the rest stays on the device.
    Untested here: this machine has no GPU."""
    return replace(record, keys=[k.cpu().pin_memory() for k in record.keys],
                   values=[v.cpu().pin_memory() for v in record.values])


def _small_to(record: PrefillRecord, device) -> PrefillRecord:
    """A spilled record's small tensors on the model's device (its K/V stay mapped on the host)."""
    if device is None or torch.device(device).type == "cpu":
        return record
    move = lambda t: None if t is None else t.to(device)  # noqa: E731
    return replace(record, first_logits=move(record.first_logits),
                   rankings={k: move(v) for k, v in record.rankings.items()},
                   scores={k: move(v) for k, v in record.scores.items()}, question_ids=move(record.question_ids),
                   prompt_ids=move(record.prompt_ids), dispersion=record.dispersion)


__all__ = ["RecordKeeper", "RecordPolicy", "pin_on_host", "release", "to_record_dtype"]
