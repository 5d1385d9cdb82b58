"""Spilled records round-trip bit-exactly; a corrupt or foreign file is refused and rebuilt; the
keeper spills what outgrows its memory; a narrower record dtype is cast back for compute."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from evolalloc.runtime.bounded import bound_record
from evolalloc.runtime.compress import compress_batch
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.record_store import RecordKeeper, RecordPolicy, to_record_dtype
from evolalloc.runtime.scorers import get_scorer
from evolalloc.runtime.spill import MappedLayers, open_spilled, write_spilled
from tests.runtime.conftest import random_prompt

SCORERS = [get_scorer("snapkv", window=8), get_scorer("streaming")]
KEYS = [s.key for s in SCORERS]


@pytest.fixture(scope="module")
def record(llama):
    return prefill(llama, random_prompt(90, seed=5), SCORERS, uid="r", question_ids=[7, 8])


def tensors_of(record):
    yield from zip(record.keys, [None] * record.num_layers)
    yield from zip(record.values, [None] * record.num_layers)
    yield record.first_logits, None
    yield record.prompt_ids, None
    yield record.question_ids, None
    yield record.dispersion, None
    for name in record.rankings:
        yield record.rankings[name], name
        yield record.scores[name], name


def assert_identical(a, b):
    assert (a.uid, a.length, a.bound, a.compute_dtype) == (b.uid, b.length, b.bound, b.compute_dtype)
    assert sorted(a.rankings) == sorted(b.rankings)
    for (x, _), (y, _) in zip(tensors_of(a), tensors_of(b)):
        assert x.dtype == y.dtype and torch.equal(x, y)


@pytest.mark.parametrize("bound, dtype", [(None, "float32"), (30, "float32"), (30, "bfloat16")])
def test_a_spilled_record_round_trips_bit_exactly(tmp_path, record, bound, dtype):
    original = to_record_dtype(bound_record(record, bound), dtype)
    path = write_spilled(original, tmp_path / "r.safetensors", key="k1")
    back, why = open_spilled(path, "k1")
    assert why == "re-used" and isinstance(back.keys, MappedLayers)
    assert_identical(original, back)
    budgets = np.full((3, 2), 20)
    a, b = (compress_batch([(r, budgets)], SCORERS[0]) for r in (original, back))
    for layer in range(3):
        assert torch.equal(a.keys[layer][:, :, : a.used[layer]], b.keys[layer][:, :, : b.used[layer]])


def test_a_corrupt_or_foreign_file_is_refused(tmp_path, record):
    path = write_spilled(record, tmp_path / "r.safetensors", key="k1")
    assert open_spilled(path, "another")[0] is None and "foreign" in open_spilled(path, "another")[1]
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # one flipped bit pattern in the tensor bytes
    path.write_bytes(bytes(data))
    back, why = open_spilled(path, "k1")
    assert back is None and "corrupt" in why
    path.write_bytes(bytes(data[:100]))
    assert open_spilled(path, "k1")[0] is None


def test_only_a_file_just_written_skips_the_digest(tmp_path, record):
    """``verify=False`` (the keeper, right after writing) still checks format, key and size but
    not the bytes' digest; the default (a file found on disk, e.g. on resume) hashes them."""
    path = write_spilled(record, tmp_path / "r.safetensors", key="k1")
    fresh, why = open_spilled(path, "k1", verify=False)
    assert why == "written" and isinstance(fresh.keys, MappedLayers)
    assert_identical(record, fresh)
    assert open_spilled(path, "another", verify=False)[0] is None
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    assert open_spilled(path, "k1")[0] is None  # found on disk: refused
    assert open_spilled(path, "k1", verify=False)[0] is not None  # what the flag trades away
    path.write_bytes(bytes(data[:100]))
    assert open_spilled(path, "k1", verify=False)[0] is None  # truncated: refused either way


def test_the_keeper_spills_what_outgrows_its_memory_and_reuses_it_later(tmp_path, llama, record):
    policy = RecordPolicy(bound=30, memory=0, spill_dir=str(tmp_path), model_id="tiny")
    keeper = RecordKeeper(policy)
    ids, question = record.prompt_ids.tolist(), record.question_ids.tolist()
    assert keeper.reuse(ids, question, KEYS, 30) is None  # nothing spilled yet
    kept = keeper.keep(record, KEYS, 30)
    assert isinstance(kept.keys, MappedLayers) and keeper.spilled == 1 and keeper.held == 0
    assert_identical(bound_record(record, 30), kept)

    later = RecordKeeper(policy)  # e.g. `resume`, in a new process
    again = later.reuse(ids, question, KEYS, 30)
    assert again is not None and later.reused == 1
    assert_identical(kept, again)
    # Another bound, dtype or prompt is another content: not re-used.
    assert later.reuse(ids, question, KEYS, 31) is None
    assert RecordKeeper(dataclasses.replace(policy, dtype="bfloat16")).reuse(ids, question, KEYS, 30) is None


def test_a_record_not_to_hold_is_spilled_while_memory_is_left(tmp_path, record):
    """``hold=False`` (curation's whole drawn candidates) spills with room to spare and leaves
    that room to the records kept all run; without a memory limit nothing is spilled."""
    keeper = RecordKeeper(RecordPolicy(bound=30, memory=1 << 30, spill_dir=str(tmp_path), model_id="tiny"))
    whole = keeper.keep(record, KEYS, None, hold=False)
    assert isinstance(whole.keys, MappedLayers) and keeper.spilled == 1 and keeper.held == 0
    assert_identical(record, whole)
    bounded = keeper.keep(whole, KEYS, 30)  # the kept candidate, bounded for the search: held
    assert not isinstance(bounded.keys, MappedLayers) and keeper.held == bounded.nbytes()
    assert_identical(bound_record(record, 30), bounded)
    unlimited = RecordKeeper(RecordPolicy(bound=30, memory=None, spill_dir=str(tmp_path / "none"), model_id="tiny"))
    assert unlimited.keep(record, KEYS, None, hold=False) is record and unlimited.spilled == 0


def test_a_corrupt_spilled_record_is_rebuilt_not_used(tmp_path, record):
    policy = RecordPolicy(bound=30, memory=0, spill_dir=str(tmp_path), model_id="tiny")
    RecordKeeper(policy).keep(record, KEYS, 30)
    (path,) = tmp_path.glob("*.safetensors")
    data = bytearray(path.read_bytes())
    data[-9] ^= 0x01
    path.write_bytes(bytes(data))
    keeper = RecordKeeper(policy)
    ids, question = record.prompt_ids.tolist(), record.question_ids.tolist()
    assert keeper.reuse(ids, question, KEYS, 30) is None
    assert keeper.rebuilt == 1 and "corrupt" in keeper.notes[0]
    keeper.keep(record, KEYS, 30)  # the caller prefilled again: the file is whole again
    assert RecordKeeper(policy).reuse(ids, question, KEYS, 30) is not None


def test_records_within_the_memory_limit_stay_in_memory(record):
    keeper = RecordKeeper(RecordPolicy(bound=None, memory=10 * record.nbytes()))
    kept = keeper.keep(record, KEYS, None)
    assert kept is record and keeper.held == record.nbytes() and keeper.spilled == 0


def test_a_16_bit_record_halves_its_kv_and_compresses_to_the_model_dtype(record):
    narrow = to_record_dtype(record, "bfloat16")
    assert narrow.keys[0].dtype == torch.bfloat16 and narrow.compute_dtype == torch.float32
    assert narrow.nbytes() < record.nbytes()
    budgets = np.full((3, 2), 20)
    cache = compress_batch([(narrow, budgets)], SCORERS[0])
    full = compress_batch([(record, budgets)], SCORERS[0])
    used = cache.used[0]
    assert cache.keys[0].dtype == torch.float32
    assert torch.equal(cache.keys[0][:, :, :used], full.keys[0][:, :, :used].to(torch.bfloat16).float())


def test_a_spilled_record_kept_again_as_it_is_is_not_written_twice(tmp_path, record):
    keeper = RecordKeeper(RecordPolicy(bound=None, memory=0, spill_dir=str(tmp_path), model_id="tiny"))
    spilled = keeper.keep(record, KEYS, None)  # e.g. a drawn candidate, whole
    assert keeper.keep(spilled, KEYS, 500) is spilled  # its bound is beyond the prompt: nothing to drop
    assert len(list(tmp_path.glob("*.safetensors"))) == 1
    bounded = keeper.keep(spilled, KEYS, 30)  # kept for the search: bounded now, spilled under its own key
    assert bounded.bound == 30 and len(list(tmp_path.glob("*.safetensors"))) == 2


def test_a_record_spilled_before_the_run_folder_existed_is_moved_there_and_found_again(tmp_path, record):
    # As a curated split: the drawn candidate is spilled whole to a temporary folder, then the run
    # folder becomes the spill folder (``Experiment.record_curations``) and the candidate is kept.
    keeper = RecordKeeper(RecordPolicy(bound=None, memory=0, model_id="tiny"))
    drawn = keeper.keep(record, KEYS, None)
    temporary = drawn.keys.mapping.path.parent
    assert temporary != tmp_path and len(list(temporary.glob("*.safetensors"))) == 1
    keeper.policy = dataclasses.replace(keeper.policy, spill_dir=str(tmp_path / "records"), bound=500)
    kept = keeper.keep(drawn, KEYS, 500)  # the prompt (90 tokens) fits under the bound: kept whole
    moved = list((tmp_path / "records").glob("*.safetensors"))
    assert len(moved) == 1 and not list(temporary.glob("*.safetensors"))
    assert_identical(record, kept)  # served from the moved file
    ids, question = record.prompt_ids.tolist(), record.question_ids.tolist()
    later = RecordKeeper(keeper.policy)  # `resume`, in a new process, asks for the run's bound
    again = later.reuse(ids, question, KEYS, 500)
    assert again is not None and later.reused == 1
    assert_identical(record, again)
    keeper.close()


def test_a_batch_maps_one_spilled_record_at_a_time_and_compresses_as_in_memory(tmp_path, record, monkeypatch):
    from evolalloc.runtime import spill

    keeper = RecordKeeper(RecordPolicy(bound=None, memory=0, spill_dir=str(tmp_path), model_id="tiny"))
    others = [dataclasses.replace(record, uid=f"r{i}", prompt_ids=record.prompt_ids + i + 1) for i in range(3)]
    spilled = [keeper.keep(r, KEYS, None) for r in [record, *others]]
    assert all(isinstance(r.keys, MappedLayers) for r in spilled)
    most = []
    opened = spill._Mapping.tensor

    def tensor(self, name):  # count the mappings alive while the batch is gathered
        most.append(sum(1 for r in spilled if r.keys.mapping._tensors is not None) + (self._tensors is None))
        return opened(self, name)

    monkeypatch.setattr(spill._Mapping, "tensor", tensor)
    budgets = np.array([[20, 40], [90, 8], [12, 12]])
    cache = compress_batch([(r, budgets) for r in spilled], SCORERS[0])
    assert max(most) == 1  # never two records mapped at once
    assert all(r.keys.mapping._tensors is None for r in spilled)  # all unmapped once the batch is built
    whole = compress_batch([(r, budgets) for r in [record, *others]], SCORERS[0])
    for a, b in zip([*cache.keys, *cache.values], [*whole.keys, *whole.values]):
        assert torch.equal(a, b)
