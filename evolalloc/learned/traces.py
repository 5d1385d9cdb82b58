"""Training traces for the learned scorer: keys, values and future-attention importance.

One full-attention forward per prompt (the prompt plus its reference answer, teacher-forced, so
the last future queries are the answer's). During that forward a ``TraceCapture`` records, per
layer, the keys/values and, for each sampled split point ``n``, the importance of every token
``i < n`` (paper §3.1.1):

    importance[l, h, i] = sum_{j = n}^{n + f - 1}  max_{q in group(h)}  A_q(j, i)

— the attention that the next ``f`` queries pay to token ``i``; with GQA, the maximum over the
query heads that share KV head ``h``. ``A`` is the ordinary causal softmax of the full sequence.
Future queries are processed in chunks of ``_CHUNK`` rows, so the side computation needs
``Hq x _CHUNK x L`` floats at a time whatever the trace length.

On disk, a trace folder holds ``index.json`` (format, version, model identity, geometry, the
corpus settings, one entry per file) and one ``trace-NNNNN.pt`` per prompt, a ``torch.save`` dict:

    format "evolalloc-trace", version 1, uid, task
    ids          int32   [L]                      prompt + answer tokens
    prompt_len   int                              where the answer starts
    keys, values float16 [layers, Hkv, L, D]      keys after RoPE, as cached
    splits       int64   [S]                      split points n (ascending)
    future       int64   [S]                      queries counted after each split (<= f)
    importance   list of S float32 [layers, Hkv, n]
    votes_window int                              (v2) w of the votes below; 0: none recorded
    votes        list of S float32 [layers, Hkv, n]   (v2, when votes_window > 0)
    snap_votes   list of S float32 [layers, Hkv, n]   (v2, when votes_window > 0; absent in older files)

``votes`` are SnapKV's votes at the split, what the query-aware gates read (``runtime.gates``):

    votes[l, h, i] = mean_{q in group(h)}  sum_{j = n - w}^{n - 1}  A_q(j, i)

— the attention the last ``w`` queries *before* ``n`` pay to token ``i`` (averaged over the
query heads of the KV group, as ``LayerStats.per_kv_head`` does for SnapKV), exactly what the
runtime's window attention gives a prompt that ends at ``n``. ``snap_votes`` are the same votes
smoothed as the ``snapkv`` scorer smooths them (``runtime.gates.snap_votes``: max-pooled per query
head, then the group mean), what anchored gates start from. Version 1 traces (no votes) still
load; training gates that read votes refuses them.

At ~1k tokens on SmolLM2-135M (30 x 3 x 64) that is ~24 MB per trace, nearly all keys/values.
The last split is always the prompt end (future = the answer), the others uniform in
``[min_split, L - f]``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from evolalloc.learned.settings import TraceSettings
from evolalloc.runtime.capture import CaptureSpec, PrefillCapture, _attention_rows
from evolalloc.runtime.gates import snap_votes
from evolalloc.runtime.support import text_config

FORMAT = "evolalloc-trace"
VERSION = 2
READABLE = (1, 2)  # v1: no votes
_CHUNK = 128  # future queries per attention chunk (memory bound, see module docstring)


class TraceCapture(PrefillCapture):
    """A prefill capture (keys and values, no scorer statistics) that also measures each split's
    future-attention importance on the side."""

    def __init__(self, splits: list[int], future: int, votes: int = 0):
        super().__init__(CaptureSpec())
        self.splits, self.future, self.votes_window = splits, future, votes
        self.importance: dict[int, list[torch.Tensor]] = {}
        self.votes: dict[int, list[torch.Tensor]] = {}
        self.snap_votes: dict[int, list[torch.Tensor]] = {}

    def record(self, layer_idx: int, query, key, value, scaling: float, window: int | None = None,
               softcap: float | None = None) -> None:
        """query ``[1, Hq, L, D]``, key/value ``[1, Hkv, L, D]`` of one full causal forward; ``window`` /
        ``softcap``: the layer's sliding window and logit soft-cap, applied to the future attention too."""
        kv_heads, length = key.shape[1], key.shape[2]
        if not torch.isfinite(key).all() or key.abs().max() > 6e4 or value.abs().max() > 6e4:
            raise ValueError(f"layer {layer_idx}: keys/values do not fit float16 storage")
        super().record(layer_idx, query, key, value, scaling, window=window, softcap=softcap)
        self._sliding, self._softcap = window, softcap
        group = query.shape[1] // kv_heads
        expanded = key[0].repeat_interleave(group, dim=0)  # [Hq, L, D]
        per_split = []
        for n in self.splits:
            stop = min(n + self.future, length)
            total = torch.zeros(kv_heads, n, dtype=torch.float32, device=key.device)
            for start in range(n, stop, _CHUNK):
                rows = _attention_rows(query[0, :, start : min(start + _CHUNK, stop)], expanded, scaling, start,
                                       window, softcap)  # [Hq, c, L]
                grouped = rows[..., :n].view(kv_heads, group, rows.shape[1], n)
                total += grouped.amax(dim=1).sum(dim=1)  # GQA: max over the group's query heads
            per_split.append(total.cpu())
        self.importance[layer_idx] = per_split
        if self.votes_window:
            both = [self._votes(query, expanded, scaling, n, kv_heads, group) for n in self.splits]
            self.votes[layer_idx] = [plain for plain, _ in both]
            self.snap_votes[layer_idx] = [smoothed for _, smoothed in both]

    def _votes(self, query, expanded, scaling: float, n: int, kv_heads: int, group: int) -> tuple[torch.Tensor,
                                                                                                  torch.Tensor]:
        """SnapKV's votes at split ``n`` and the same smoothed as SnapKV does: two ``[Hkv, n]`` float32
        (module docstring)."""
        start = max(0, n - self.votes_window)
        # [Hq, w, n]
        rows = _attention_rows(query[0, :, start:n], expanded[:, :n], scaling, start, self._sliding, self._softcap)
        per_query_head = rows.sum(dim=1)  # [Hq, n]
        return per_query_head.view(kv_heads, group, n).mean(dim=1).cpu(), snap_votes(per_query_head, kv_heads).cpu()


def pick_splits(length: int, prompt_len: int, settings: TraceSettings, rng: random.Random) -> list[int]:
    """``splits_per_trace - 1`` random splits in ``[min_split, length - future]`` plus the prompt end."""
    high = length - settings.future
    randoms = []
    if high > settings.min_split and settings.splits_per_trace > 1:
        randoms = [rng.randint(settings.min_split, high) for _ in range(settings.splits_per_trace - 1)]
    return sorted(set(randoms + [prompt_len]))


@torch.no_grad()
def trace_ids(model, ids: list[int], splits: list[int], future: int, votes: int = 0) -> dict:
    """Run one forward over ``ids`` and return the stored fields of a trace (without metadata);
    ``votes``: the window of the SnapKV votes to record per split (0: none)."""
    device = next(model.parameters()).device
    tensor = torch.tensor(ids, dtype=torch.long, device=device)[None]
    capture = TraceCapture(splits, future, votes)
    model(input_ids=tensor, position_ids=torch.arange(len(ids), device=device)[None], use_cache=False,
          logits_to_keep=1, evolalloc_capture=capture)
    layers = text_config(model.config).num_hidden_layers
    record = {
        "ids": torch.tensor(ids, dtype=torch.int32),
        # Stored as float16 on the CPU (checked to fit in record()).
        "keys": torch.stack([capture.keys[i].to(torch.float16).cpu() for i in range(layers)]),
        "values": torch.stack([capture.values[i].to(torch.float16).cpu() for i in range(layers)]),
        "splits": torch.tensor(splits, dtype=torch.int64),
        "future": torch.tensor([min(future, len(ids) - n) for n in splits], dtype=torch.int64),
        "importance": [torch.stack([capture.importance[i][s] for i in range(layers)]) for s in range(len(splits))],
        "votes_window": votes,
    }
    if votes:
        record["votes"] = [torch.stack([capture.votes[i][s] for i in range(layers)]) for s in range(len(splits))]
        record["snap_votes"] = [torch.stack([capture.snap_votes[i][s] for i in range(layers)])
                                for s in range(len(splits))]
    return record


def corpus(settings: TraceSettings, tokenizer) -> list[tuple[str, object]]:
    """``(task name, instance)`` pairs: ``count`` prompts, round-robin over tasks x lengths."""
    from fitness import get_task

    combos = [(t, n) for t in settings.tasks for n in settings.lengths]
    per_combo = [settings.count // len(combos) + (i < settings.count % len(combos)) for i in range(len(combos))]
    out = []
    for (task_name, length), k in zip(combos, per_combo):
        if k:
            task = get_task(task_name)
            out += [(task_name, inst) for inst in task.instances(settings.split, k, settings.seed, length, tokenizer)]
    return out


def write_traces(loaded, out_dir: str | Path, settings: TraceSettings, *, identity: dict,
                 progress: bool = True) -> Path:
    """Trace ``settings.count`` prompts into ``out_dir`` (a new or empty folder); returns it."""
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"trace folder {out} is not empty; choose a new folder")
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(settings.seed)
    entries = []
    items = corpus(settings, loaded.tokenizer)
    for i, (task_name, inst) in enumerate(tqdm(items, desc="trace", unit="prompt", disable=not progress)):
        prompt = loaded.tokenizer.encode(inst.prompt)
        answer = loaded.tokenizer.encode(inst.references[0], add_special_tokens=False) if inst.references else []
        ids = prompt + answer
        splits = pick_splits(len(ids), len(prompt), settings, rng)
        record = trace_ids(loaded.model, ids, splits, settings.future, settings.votes)
        record.update(format=FORMAT, version=VERSION, uid=inst.uid, task=task_name, prompt_len=len(prompt))
        name = f"trace-{i:05d}.pt"
        torch.save(record, out / name)
        entries.append({"file": name, "uid": inst.uid, "task": task_name, "length": len(ids), "splits": splits})
    index = {"format": FORMAT, "version": VERSION, "model": identity, "geometry": loaded.geometry.to_dict(),
             "settings": asdict(settings), "traces": entries}
    (out / "index.json").write_text(json.dumps(index, indent=1))
    return out


@dataclass
class TraceSet:
    """A loaded trace folder: its index and the traces (float16 K/V; in memory, or ``LazyTraces``)."""

    folder: Path
    index: dict
    traces: Sequence[dict] = field(default_factory=list)

    @property
    def items(self) -> list[tuple[int, int]]:
        """Every (trace, split) pair: the unit of training and evaluation."""
        return [(t, s) for t, trace in enumerate(self.traces) for s in range(len(trace["splits"]))]


class LazyTraces(Sequence):
    """A trace folder's traces, each read when asked for and memory-mapped (``torch.load(mmap=True)``),
    the last one kept: a list of trace dicts to its users, but the process holds one trace's pages,
    not every trace's K/V (~24 MB per 1k-token prompt; 36 of them were most of the gate training's
    memory in the main job, issue 22). The values are the file's, so training on them is the same."""

    def __init__(self, folder: Path, files: list[str]):
        self.folder, self.files = folder, files
        self._last: tuple[int, dict] | None = None

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = range(len(self))[index]
        if self._last is None or self._last[0] != index:
            self._last = None  # drop (unmap) the previous trace before mapping the next
            self._last = (index,
                          torch.load(self.folder / self.files[index], map_location="cpu", weights_only=True, mmap=True))
        return self._last[1]


def load_traces(folder: str | Path, *, geometry: dict | None = None, lazy: bool = False) -> TraceSet:
    """Read a trace folder; ``ValueError`` if it is missing, of another version or geometry.
    ``lazy``: the traces are read one at a time when used (``LazyTraces``), not all at once."""
    folder = Path(folder)
    index_path = folder / "index.json"
    if not index_path.is_file():
        raise ValueError(f"{folder} is not a trace folder (no index.json); make one with `evolalloc scorer trace`")
    index = json.loads(index_path.read_text())
    if index.get("format") != FORMAT or index.get("version") not in READABLE:
        raise ValueError(f"{index_path}: trace format {index.get('format')!r} "
                         f"v{index.get('version')!r}, expected {FORMAT!r} v{VERSION}")
    if geometry is not None:
        for key in ("num_layers", "num_kv_heads", "head_dim"):
            if index["geometry"][key] != geometry[key]:
                raise ValueError(f"{folder}: traces have {key}={index['geometry'][key]}, "
                                 f"the model/policy has {geometry[key]}")
    if lazy:
        traces = LazyTraces(folder, [e["file"] for e in index["traces"]])
    else:
        traces = [torch.load(folder / e["file"], map_location="cpu", weights_only=True) for e in index["traces"]]
    if not traces:
        raise ValueError(f"{folder} holds no traces")
    return TraceSet(folder=folder, index=index, traces=traces)


def votes_window(traces: TraceSet) -> int:
    """The votes window every trace of the set recorded (0 when any has none: a v1 trace)."""
    return min(int(trace.get("votes_window", 0)) for trace in traces.traces)
