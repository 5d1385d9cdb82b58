"""``give_back`` returns freed tensor memory to the system (glibc), changing no value."""

from __future__ import annotations

import ctypes.util

import pytest
import torch

from evolalloc.runtime.heap import give_back


def resident_anonymous_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    pytest.skip("no /proc/self/status")


def test_freed_tensors_stop_being_resident_after_give_back():
    if ctypes.util.find_library("c") is None:
        pytest.skip("no C library to trim")
    kept = torch.arange(1000, dtype=torch.float32)
    # Freeing one large block raises glibc's mmap threshold, so the next ~4 MB tensors come from
    # its heap — as prefill activations and trace tensors do in a run — and stay resident when freed.
    large = torch.empty(16 << 20, dtype=torch.uint8).fill_(1)  # below glibc's 32 MB threshold cap
    del large
    many = [torch.ones(1 << 20, dtype=torch.float32) for _ in range(60)]  # 60 x 4 MB, touched
    pin = torch.ones(1 << 18, dtype=torch.float32)  # allocated after them: the heap cannot shrink from its top
    before_free = resident_anonymous_mb()
    del many
    freed = resident_anonymous_mb()
    assert give_back()
    after = resident_anonymous_mb()
    assert freed - after > 150, (before_free, freed, after)  # most of the 240 MB went back
    assert torch.equal(kept, torch.arange(1000, dtype=torch.float32)) and bool((pin == 1).all())


def test_give_back_without_collecting_still_trims():
    if ctypes.util.find_library("c") is None:
        pytest.skip("no C library to trim")
    large = torch.empty(16 << 20, dtype=torch.uint8).fill_(1)
    del large
    many = [torch.ones(1 << 20, dtype=torch.float32) for _ in range(60)]
    pin = torch.ones(1 << 18, dtype=torch.float32)
    del many
    freed = resident_anonymous_mb()
    assert give_back(collect=False)
    assert freed - resident_anonymous_mb() > 150 and bool((pin == 1).all())
