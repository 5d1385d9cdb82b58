"""What ``--plan`` adds for records spilled to disk: the comparison reads them again, cell after cell.

The held-out comparison scores each (method, budget) cell over every held-out record, one cell at a
time (``pipeline/run.py: compare``; ``engine/local.py`` decodes a cell's rows record after record). A
record spilled to disk is memory-mapped per batch, so each cell reads every spilled record again —
from the page cache when the spilled records fit in the memory the machine has free, else mostly
from disk. Measured in the 8160-token study (results/long-context-8k): 36 cells over 25.7 GB of
spilled records read 468 GB from disk, 18 times their size (the first run: 390 GB, 16 times, for 30
cells) — about half the cells' reads reached the disk, the rest hit what the page cache still held.

So ``--plan`` measures this machine's read rate from disk (a file the size of one record, written
next to where records spill, dropped from the page cache, read back) and estimates the re-reading
as half the cells x the spilled bytes at that rate (the two runs above), with the whole as the
upper figure; nothing when the spilled records fit in the memory free now.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass

import numpy as np

#: The share of cells whose reads reached the disk in the two 8160-token runs (18/36, 16/30): the estimate.
DISK_SHARE = 0.5
MEASURE_BYTES = (16 * 1024**2, 256 * 1024**2)  # the measured file: one record's size within these


def free_memory() -> int | None:
    """Bytes the machine can give to the page cache now (``MemAvailable``), or ``None`` where it is not known."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def read_rate(nbytes: int, folder: str | None = None) -> float | None:
    """Bytes per second read from disk: a file of ``nbytes`` (clipped to ``MEASURE_BYTES``) written in
    ``folder`` (the temporary one if ``None``), synced, dropped from the page cache, read back, removed.
    ``None`` where the cache cannot be dropped (no ``posix_fadvise``: the read would time memory)."""
    if not hasattr(os, "posix_fadvise"):
        return None
    nbytes = int(min(max(nbytes, MEASURE_BYTES[0]), MEASURE_BYTES[1]))
    data = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8).tobytes()  # nothing compresses it
    handle, path = tempfile.mkstemp(prefix="evolalloc-plan-read-", dir=folder)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
            os.posix_fadvise(out.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        started = time.perf_counter()
        with open(path, "rb", buffering=0) as back:
            while back.read(16 * 1024**2):
                pass
        return nbytes / max(time.perf_counter() - started, 1e-6)
    finally:
        os.unlink(path)


@dataclass(frozen=True)
class ReReading:
    """The comparison's re-reading of spilled held-out records (module docstring)."""

    cells: int  # (method, budget) cells of the comparison
    spilled_bytes: float  # held-out records beyond engine.record_memory
    free_bytes: int | None  # MemAvailable when planned
    rate: float | None  # bytes per second from disk, measured

    @property
    def applies(self) -> bool:
        """Whether the spilled records are larger than the memory free now (else the page cache holds them)."""
        return self.spilled_bytes > 0 and self.rate is not None and (self.free_bytes is None
                                                                     or self.spilled_bytes > self.free_bytes)

    def seconds(self, share: float = DISK_SHARE) -> float:
        return share * self.cells * self.spilled_bytes / self.rate if self.applies else 0.0

    def line(self) -> str:
        """The explanation printed under the time estimate."""
        gib = 1024**3
        return (f"  note: the {self.spilled_bytes / gib:.1f} GiB of spilled held-out records exceed the "
                f"{(self.free_bytes or 0) / gib:.1f} GiB of memory free now, so each of the {self.cells} comparison "
                f"cells reads them again from disk ({self.rate / 1e6:.0f} MB/s measured): estimated as half the "
                f"cells' reads ({DISK_SHARE:.0%}: two 8160-token runs here), up to all of them "
                f"({self.cells * self.spilled_bytes / 1e9:.0f} GB, {self.seconds(1.0) / 60:.0f} min)")


__all__ = ["DISK_SHARE", "ReReading", "free_memory", "read_rate"]
