"""What the array exporters (``curve``, ``lukv``) share: a ``.npy`` main file with a JSON sidecar
that says where the array came from, and the check of the prompt length they are sized for."""

from __future__ import annotations

import io
import json

import numpy as np

from evolalloc.core.allocation import Allocation
from evolalloc.core.errors import UserError
from evolalloc.export.base import Rendered


def checked_context_length(value) -> int:
    """``value`` if it is a positive integer (not a bool), else a ``UserError`` on ``context_length``."""
    if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        raise UserError(f"context_length must be a positive integer, got {value!r}", field="context_length")
    return value


def source_fields(allocation: Allocation) -> dict:
    """The sidecar's description of the profile an array was derived from."""
    return {"model": allocation.model, "geometry": allocation.geometry.to_dict(),
            "scorer": allocation.scorer, "scorer_params": allocation.scorer_params}


def npy_with_sidecar(array: np.ndarray, sidecar: dict) -> Rendered:
    """``array`` as ``.npy`` bytes (no pickle) and ``sidecar`` as the ``.json`` beside it."""
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return Rendered(buffer.getvalue(), ".npy", sidecars={".json": json.dumps(sidecar, indent=2) + "\n"})
