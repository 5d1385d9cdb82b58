"""Spilled records: a prefill record as one safetensors file, its K/V memory-mapped on demand.

A spilled record keeps its small tensors (rankings, scores, first logits, token ids) in memory
and maps its keys/values from the file only while a batch uses them (``release`` unmaps), so
the resident memory of a run is what the batches touch, not every record.

A file says what it holds: its metadata carries the record's *content key* (a hash of what
determines the record: model, prompt and question tokens, scorers, bound, dtype) and a SHA-256
digest of its tensor bytes. ``open_spilled`` returns ``None`` for a missing, foreign (another
key) or corrupt (digest mismatch, unreadable) file, so the caller prefills again; a file is
never used on trust.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
from pathlib import Path

import torch

from evolalloc.runtime.prefill import PrefillRecord

FORMAT = "evolalloc.record/1"
_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64}


def content_key(model_id: str, prompt_ids, question_ids, scorer_keys, bound: int | None, dtype: str) -> str:
    """SHA-256 (hex) of everything a record's content depends on."""
    document = {
        "format": FORMAT, "model": model_id, "prompt": [int(t) for t in prompt_ids],
        "question": None if question_ids is None else [int(t) for t in question_ids],
        "scorers": sorted(scorer_keys), "bound": bound, "dtype": dtype,
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def _tensors(record: PrefillRecord) -> dict[str, torch.Tensor]:
    tensors = {f"keys.{i}": k for i, k in enumerate(record.keys)}
    tensors.update({f"values.{i}": v for i, v in enumerate(record.values)})
    tensors["first_logits"] = record.first_logits
    tensors.update({f"rankings.{name}": r for name, r in record.rankings.items()})
    tensors.update({f"scores.{name}": s for name, s in record.scores.items()})
    for name in ("question_ids", "dispersion", "prompt_ids", "slot_positions", "reach"):
        if getattr(record, name) is not None:
            tensors[name] = getattr(record, name)
    return {name: t.detach().to("cpu").contiguous() for name, t in tensors.items()}


def _digest(chunks) -> str:
    """SHA-256 over ``(name, bytes)`` pairs in name order (independent of the file's layout)."""
    digest = hashlib.sha256()
    for name, data in sorted(chunks, key=lambda c: c[0]):
        digest.update(name.encode())
        digest.update(data)
    return digest.hexdigest()


def _raw(tensor: torch.Tensor) -> memoryview:
    return memoryview(tensor.view(torch.uint8).numpy()) if tensor.numel() else memoryview(b"")


def write_spilled(record: PrefillRecord, path: str | Path, key: str) -> Path:
    """Write ``record`` to ``path`` (atomically) under content ``key``; returns the path."""
    from safetensors.torch import save_file

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = _tensors(record)
    metadata = {
        "format": FORMAT, "key": key, "uid": record.uid, "length": str(record.length),
        "bound": "" if record.bound is None else str(record.bound),
        "compute_dtype": "" if record.compute_dtype is None else str(record.compute_dtype).removeprefix("torch."),
        "layers": str(record.num_layers),
        "digest": _digest((name, _raw(t)) for name, t in tensors.items()),
    }
    partial = path.with_name(path.name + ".partial")
    save_file(tensors, str(partial), metadata=metadata)
    os.replace(partial, path)
    return path


class _Mapping:
    """One spilled file's tensors, mapped (copy-on-write, so tensors may be written in place
    without touching the file) while in use; ``release`` drops the mapping."""

    def __init__(self, path: Path, header: dict, offset: int):
        self.path, self.header, self.offset = path, header, offset
        self._tensors: dict[str, torch.Tensor] | None = None

    def tensor(self, name: str) -> torch.Tensor:
        if self._tensors is None:
            with open(self.path, "rb") as handle:
                buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
            self._tensors = {}
            self._buffer = buffer
        if name not in self._tensors:
            self._tensors[name] = _view(self._buffer, self.header[name], self.offset)
        return self._tensors[name]

    def release(self) -> None:
        # Tensors still referenced elsewhere keep the pages alive; dropping ours lets the OS unmap.
        self._tensors, self._buffer = None, None


class MappedLayers:
    """``record.keys`` / ``record.values`` of a spilled record: indexable per layer like a list."""

    def __init__(self, mapping: _Mapping, kind: str, layers: int, shapes: list[tuple[int, ...]], dtype: torch.dtype):
        self.mapping, self.kind, self.layers = mapping, kind, layers
        self.shapes, self.dtype = shapes, dtype  # per layer / stored, known without mapping the file

    def __len__(self) -> int:
        return self.layers

    def __getitem__(self, layer: int) -> torch.Tensor:
        if not -self.layers <= layer < self.layers:
            raise IndexError(layer)
        return self.mapping.tensor(f"{self.kind}.{layer % self.layers}")

    def __iter__(self):
        return (self[i] for i in range(self.layers))


def _view(buffer, entry: dict, offset: int) -> torch.Tensor:
    begin, end = entry["data_offsets"]
    dtype = _DTYPES[entry["dtype"]]
    count = (end - begin) // torch.empty(0, dtype=dtype).element_size()
    if count == 0:
        return torch.empty(entry["shape"], dtype=dtype)
    return torch.frombuffer(buffer, dtype=dtype, count=count, offset=offset + begin).reshape(entry["shape"])


def _read_header(path: Path) -> tuple[dict, int]:
    with open(path, "rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        if size > 100_000_000:
            raise ValueError("header too large")
        header = json.loads(handle.read(size))
    return header, 8 + size


def open_spilled(path: str | Path, key: str, *, verify: bool = True) -> tuple[PrefillRecord | None, str]:
    """The record spilled at ``path`` under content ``key``, or ``(None, why not)``.

    Checks the format, the key (a foreign file: another model, prompt, scorer set, bound or
    dtype) and the digest of every tensor byte (a corrupt file), before anything is used.
    ``verify=False`` skips the digest (not the format, key and size checks): only for a file
    this process has just written from the record it holds (``RecordKeeper.keep``), where
    hashing it again would read every byte back for nothing (issue 22: the main job spills
    ~150 records; a second SHA-256 pass over each was ~1/3 of the spilling time). A file found
    on disk (``resume``) is always verified.
    """
    path = Path(path)
    if not path.is_file():
        return None, "missing"
    try:
        header, offset = _read_header(path)
        meta = header.pop("__metadata__", {}) or {}
        if meta.get("format") != FORMAT:
            return None, "not an evolalloc record"
        if meta.get("key") != key:
            return None, "foreign (made for another model, prompt, scorer set, bound or dtype)"
        with open(path, "rb") as handle:
            whole = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            if any(offset + e["data_offsets"][1] > len(whole) for e in header.values()):
                return None, "corrupt (truncated)"
            if not verify:
                return _mapped_record(path, header, offset, meta), "written"
            chunks = ((name, whole[offset + e["data_offsets"][0] : offset + e["data_offsets"][1]])
                      for name, e in header.items())
            if _digest(chunks) != meta.get("digest"):
                return None, "corrupt (its bytes do not match its digest)"
        finally:
            whole.close()
        return _mapped_record(path, header, offset, meta), "re-used"
    except (OSError, ValueError, KeyError, TypeError, struct.error, json.JSONDecodeError) as err:
        return None, f"corrupt ({type(err).__name__}: {err})"


def _mapped_record(path: Path, header: dict, offset: int, meta: dict) -> PrefillRecord:
    """The record of a checked file: small tensors read into memory, K/V mapped on demand."""
    layers = int(meta["layers"])
    mapping = _Mapping(path, header, offset)
    small = {name: mapping.tensor(name).clone() for name in header if not name.startswith(("keys.", "values."))}
    mapping.release()
    dtype = _DTYPES[header["keys.0"]["dtype"]]
    return PrefillRecord(
        uid=meta["uid"], length=int(meta["length"]),
        keys=MappedLayers(mapping, "keys", layers, [tuple(header[f"keys.{i}"]["shape"]) for i in range(layers)], dtype),
        values=MappedLayers(mapping, "values", layers, [tuple(header[f"values.{i}"]["shape"]) for i in range(layers)],
                            dtype),
        first_logits=small["first_logits"],
        rankings={name.removeprefix("rankings."): t for name, t in small.items() if name.startswith("rankings.")},
        scores={name.removeprefix("scores."): t for name, t in small.items() if name.startswith("scores.")},
        question_ids=small.get("question_ids"), dispersion=small.get("dispersion"), prompt_ids=small.get("prompt_ids"),
                         slot_positions=small.get("slot_positions"), reach=small.get("reach"),
        bound=int(meta["bound"]) if meta.get("bound") else None,
        compute_dtype=getattr(torch, meta["compute_dtype"]) if meta.get("compute_dtype") else None,
    )


def release(record: PrefillRecord) -> None:
    """Unmap a spilled record's K/V (a no-op for a record held in memory)."""
    keys = record.keys
    if isinstance(keys, MappedLayers):
        keys.mapping.release()
