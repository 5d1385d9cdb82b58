"""Reading a trained network's checkpoint safely: what the learned policy and the gates share.

A checkpoint is a ``torch.save`` dict ``{format, version, geometry, model, config, state_dict,
training}``. It is loaded with ``weights_only=True`` (tensors and plain data only: a checkpoint
received from someone else cannot run code), then its format and version are checked, and, when
the caller knows them, the model geometry and the model's identity (type + weight fingerprint)
it was trained on. Every problem is one ``ValueError`` naming the file.
"""

from __future__ import annotations

import io
from pathlib import Path

import torch

# The geometry a per-head network must share with the model it ranks tokens for.
MATCHED_GEOMETRY = ("num_layers", "num_query_heads", "num_kv_heads", "head_dim")


def read_checkpoint(path: str | Path, *, what: str, fmt: str, version: int, train_hint: str,
                    geometry: dict | None = None, model: dict | None = None) -> dict:
    """The checked payload of ``path``; ``what`` names the network in messages ("policy", "gates")."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ValueError(f"no {what} checkpoint at {str(path)!r}; train one with `{train_hint}`")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a corrupt or non-torch file: say which file
        raise ValueError(f"{path}: not a readable {what} checkpoint ({_one_line(exc)})") from None
    if not isinstance(payload, dict) or payload.get("format") != fmt:
        found = payload.get("format") if isinstance(payload, dict) else None
        raise ValueError(f"{path}: not an evolalloc {what} checkpoint (format {found!r})")
    if payload.get("version") != version:
        raise ValueError(f"{path}: {what} checkpoint version {payload.get('version')!r}, "
                         f"this evolalloc reads version {version}")
    stored = payload["geometry"]
    if geometry is not None:
        wrong = {k: (stored.get(k), geometry.get(k)) for k in MATCHED_GEOMETRY if stored.get(k) != geometry.get(k)}
        if wrong:
            detail = ", ".join(f"{k}: checkpoint {a} vs model {b}" for k, (a, b) in wrong.items())
            raise ValueError(f"{path}: the {what} was trained for another model geometry ({detail})")
    if model is not None:
        for key in ("model_type", "fingerprint"):
            if payload["model"].get(key) != model.get(key):
                raise ValueError(
                    f"{path}: the {what} was trained on model {payload['model'].get('spec')!r} "
                    f"({key} {payload['model'].get(key)!r}), not on {model.get('spec')!r} ({key} {model.get(key)!r})"
                )
    return payload


def _one_line(exc: Exception) -> str:
    """An exception as one short line: torch's unpickling errors run to a dozen lines of advice."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:100]}{'...' if len(first) > 100 else ''}"


_FINGERPRINTS: dict[tuple[str, int, int], dict] = {}


def checkpoint_provenance(path: str | Path) -> dict:
    """What a profile records about the checkpoint its scorer read: the file, its sha256, and how
    it was trained (steps, seed, the traces' tasks and splits, the model), from its ``training``.

    ``ValueError`` when the file is missing or unreadable. Cached per (path, size, mtime): the
    pipeline asks once per allocation it writes.
    """
    import hashlib

    path = Path(path).expanduser()
    if not path.is_file():
        raise ValueError(f"no checkpoint at {str(path)!r}")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _FINGERPRINTS:
        data = path.read_bytes()
        try:
            payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        except Exception as exc:
            raise ValueError(f"{path}: not a readable checkpoint ({_one_line(exc)})") from None
        training = payload.get("training", {}) if isinstance(payload, dict) else {}
        settings = training.get("traces_settings") or {}
        trained = {
            "steps": training.get("steps"), "seed": training.get("seed"),
            "tasks": list(training.get("tasks") or settings.get("tasks") or []),
            "splits": list(training.get("splits") or ([settings["split"]] if settings.get("split") else [])),
            "traces": training.get("trace_count", settings.get("count")),
            "model": (payload.get("model") or {}).get("spec") if isinstance(payload, dict) else None,
        }
        if training.get("in_run_key"):
            trained["in_run_key"] = training["in_run_key"]
        _FINGERPRINTS[key] = {"path": str(path), "sha256": hashlib.sha256(data).hexdigest(),
                              "format": payload.get("format") if isinstance(payload, dict) else None,
                              "trained": trained}
    return dict(_FINGERPRINTS[key])
