"""Giving freed memory back to the operating system between the phases of a run.

glibc's allocator keeps what a process frees for re-use: tensors of a few to a few tens of MB
(trace tensors, prefill activations, whole prefill records) come from its heap once its dynamic
mmap threshold has grown past them, and freeing them leaves the pages resident. Measured on the
main job (issue 22): ~0.85 GB of trace tensors stayed resident after gate training was done, and
the prefills of curation's candidates left ~0.5 GB more — all counted in the peak when the next
phase allocated on top of them. ``give_back`` asks the allocator to return every free page
(``malloc_trim(0)``); it changes no tensor, so no number of a run. Elsewhere than glibc it does
nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from functools import lru_cache


@lru_cache(maxsize=1)
def _trim():
    """glibc's ``malloc_trim``, or ``None`` (another C library, or none found)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = [ctypes.c_size_t], ctypes.c_int
    return function


def give_back(collect: bool = True) -> bool:
    """Collect Python's garbage (unless ``collect`` is false: tensors freed by reference counting
    need no collection), then return the allocator's free pages; whether it could."""
    if collect:
        gc.collect()
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
