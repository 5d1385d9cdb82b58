"""How prefill records are kept (``engine.record_dtype``, ``engine.record_memory``): names and sizes.

Plain Python (no torch), so checking a recipe stays instant; the runtime (``runtime/record_store.py``)
applies them.
"""

from __future__ import annotations

import re

# float32 keeps every result identical to a full-precision record; the 16-bit ones halve the
# records' memory at the cost of rounding the kept keys/values (the model still computes in its dtype).
RECORD_DTYPES = ("float32", "bfloat16", "float16")
# Why 256 MiB: the README's main job peaks at the model (~0.6 GB mapped for the bundled 135M, ~0.3 GB
# of runtime), one decode batch (16 rows of whole 1k-token records at the full-cache curation: ~0.75
# GB), the small tensors of every spilled record (rankings, scores, logits: ~2.4 MB each at 1k) and
# the records held in memory. With 1 GiB held it peaked at 4.35 GB; with 256 MiB the rest spill to
# the run folder, are mapped one record at a time while a batch is gathered (runtime/compress.py)
# and the job stays under 3 GiB. Results are identical either way (a spilled record is bit-exact).
DEFAULT_RECORD_MEMORY = "256MiB"

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12,
          "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text) -> int:
    """``"4GiB"``, ``"512MB"``, ``"0"`` or a number of bytes -> bytes (int); ``ValueError`` otherwise."""
    if isinstance(text, bool):
        raise ValueError(f"expected a size such as 4GiB or 512MB, got {text!r}")
    if isinstance(text, (int, float)):
        if text < 0:
            raise ValueError(f"a size must be >= 0, got {text!r}")
        return int(text)
    match = _SIZE.match(str(text))
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"expected a size such as 4GiB or 512MB, got {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def format_size(nbytes: float) -> str:
    """``nbytes`` as a person reads it: ``"1.50 GiB"`` from 1 GiB up, else ``"12.0 MiB"`` (``parse_size``
    reads both)."""
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.1f} MiB"
