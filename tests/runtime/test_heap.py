"""``give_back`` returns freed tensor memory to the system (glibc), changing no value.

Each scenario runs in a fresh interpreter: how much of a free stays resident depends on the
allocator's history (its dynamic mmap threshold), which the rest of a test session changes.
"""

from __future__ import annotations

import ctypes.util
import subprocess
import sys

import pytest

SCENARIO = """
import sys
import torch
from evolalloc.runtime.heap import give_back

def resident_mb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    sys.exit(3)

collect = sys.argv[1] == "collect"
kept = torch.arange(1000, dtype=torch.float32)
# Freeing one large block raises glibc's mmap threshold, so the next ~4 MB tensors come from
# its heap — as prefill activations and trace tensors do in a run — and stay resident when freed.
large = torch.empty(16 << 20, dtype=torch.uint8).fill_(1)  # below glibc's 32 MB threshold cap
del large
many = [torch.ones(1 << 20, dtype=torch.float32) for _ in range(60)]  # 60 x 4 MB, touched
pin = torch.ones(1 << 18, dtype=torch.float32)  # allocated after them: the heap cannot shrink from its top
del many
freed = resident_mb()
assert give_back(collect=collect)
after = resident_mb()
assert freed - after > 150, (freed, after)  # most of the 240 MB went back
assert torch.equal(kept, torch.arange(1000, dtype=torch.float32)) and bool((pin == 1).all())
"""


@pytest.mark.parametrize("mode", ["collect", "no-collect"])
def test_freed_tensors_stop_being_resident_after_give_back(mode):
    if ctypes.util.find_library("c") is None:
        pytest.skip("no C library to trim")
    done = subprocess.run([sys.executable, "-c", SCENARIO, mode], capture_output=True, text=True, timeout=120)
    if done.returncode == 3:
        pytest.skip("no /proc/self/status")
    assert done.returncode == 0, done.stderr[-2000:]
