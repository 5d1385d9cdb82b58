"""``bench gpu``: what a search costs at a real model's shape, on this device, measured side by side.

On a model of a real shape with random weights (``bench/gpu_shape.py``; speed and memory do not
depend on the weights) and random-token prompts of ``context`` tokens, in one run:

(a) seconds per candidate on cached, bounded prefill records: compress + batched greedy decode of
    every (prompt, allocation) row, as the local evaluator runs them (the task metric, a string
    comparison, is the only part left out: random weights answer nothing);
(b) seconds per candidate when every candidate prefills its prompts again (measured on a few);
(c) the bare decode floor: the stock model (SDPA, transformers' ``DynamicCache``) decoding the
    same rows for the same number of tokens from caches of the same mean size;
and the prefill speed, the records' memory per prompt and an estimate (labelled so) of candidates
per hour for a search over ``instances`` prompts. Random weights never emit the end token, so
every row decodes exactly ``new_tokens`` tokens on every path.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

import numpy as np
import torch

from evolalloc.bench.eval import floor_decode_seconds, random_allocations, synchronize
from evolalloc.core.record_settings import format_size as size


@dataclass
class GpuBenchSettings:
    context: int = 8192
    budget: int = 512
    prompts: int = 4
    candidates: int = 8
    reprefill_candidates: int = 1
    new_tokens: int = 16
    batch_size: int = 16
    instances: int = 100  # the search size the candidates-per-hour estimate is for
    upper_ratio: float = 4.0  # b_max = ceil(upper_ratio * budget), as a run's default search space bounds it
    seed: int = 0

    @property
    def b_max(self) -> int:
        return math.ceil(self.upper_ratio * self.budget)


@dataclass
class GpuBenchResult:
    """What one run measured; ``lines()`` prints it, ``to_dict()`` is the JSON of ``gpu_check.sh``."""

    shape: str
    layers: int
    full_layers: int
    kv_heads: int
    head_dim: int
    device: str
    device_name: str
    dtype: str
    settings: GpuBenchSettings
    prefill_seconds: float  # mean per prompt, SnapKV capture and ranking included
    cached_per_candidate: float
    reprefill_per_candidate: float
    floor_per_candidate: float
    record_bytes_whole: float  # mean per prompt
    record_bytes_bounded: float
    weight_bytes: int
    device_peak_prefill: int | None  # CUDA: peak allocated during one prefill, weights included
    device_peak_records: int | None  # CUDA: allocated once every bounded record is held, weights excluded
    versions: dict = field(default_factory=dict)
    profile: str | None = None  # with --profile: the operators' table of one batch of (a) and (c)

    @property
    def truncated(self) -> bool:
        return self.layers < self.full_layers

    @property
    def reprefill_over_cached(self) -> float:
        return self.reprefill_per_candidate / self.cached_per_candidate

    @property
    def cached_over_floor(self) -> float:
        return self.cached_per_candidate / self.floor_per_candidate

    @property
    def prefill_tokens_per_second(self) -> float:
        return self.settings.context / self.prefill_seconds

    @property
    def estimated_candidate_seconds(self) -> float:
        """Seconds per candidate over ``instances`` prompts: the measured time per row, times the rows (an estimate)."""
        return self.cached_per_candidate / self.settings.prompts * self.settings.instances

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(
            truncated=self.truncated,
            reprefill_over_cached=self.reprefill_over_cached,
            cached_over_floor=self.cached_over_floor,
            prefill_tokens_per_second=self.prefill_tokens_per_second,
            b_max=self.settings.b_max,
            estimate=dict(
                instances=self.settings.instances,
                candidate_seconds=self.estimated_candidate_seconds,
                candidates_per_hour=3600 / self.estimated_candidate_seconds,
                prefill_seconds=self.prefill_seconds * self.settings.instances,
            ),
        )
        return out

    def lines(self) -> list[str]:
        s = self.settings
        out = []
        if self.truncated:
            out.append(f"!! TRUNCATED: {self.layers} of {self.shape}'s {self.full_layers} "
                       f"layers; every figure is for {self.layers} layers !!")
        out += [
            f"shape: {self.shape} ({self.layers} layers x {self.kv_heads} "
            f"KV heads, head size {self.head_dim}), random weights, "
            f"{self.dtype} on {self.device} ({self.device_name}); " + ", ".join(f"{k} {v}"
                                                                                for k, v in self.versions.items()),
            f"rows: {s.prompts} random-token prompts of {s.context} "
            f"tokens x {s.candidates} random allocations at c = {s.budget} "
            f"(records bounded at b_max = {s.b_max}); {s.new_tokens} "
            "tokens decoded per row (random weights: no end token), "
            f"{s.batch_size} rows per forward",
            f"(a) cached records        : {self.cached_per_candidate:9.3f} s per candidate",
            f"(b) re-prefill each time  : {self.reprefill_per_candidate:9.3f} "
            f"s per candidate (measured on {s.reprefill_candidates})",
            f"(c) bare decode floor     : {self.floor_per_candidate:9.3f} s "
            "per candidate (stock SDPA + DynamicCache, same rows and tokens)",
            f"b/a (re-prefill / cached) : {self.reprefill_over_cached:9.1f}x",
            f"a/c (cached / floor)      : {self.cached_over_floor:9.2f}x",
            f"prefill                   : {self.prefill_tokens_per_second:9.0f} tokens/s "
            f"({self.prefill_seconds:.3f} s per prompt, SnapKV ranking included)",
            f"records per prompt        : {size(self.record_bytes_bounded):>13} bounded at b_max = {s.b_max} "
            f"({size(self.record_bytes_whole)} whole)",
        ]
        if self.device_peak_prefill is not None:
            out.append(f"device memory             : weights {size(self.weight_bytes)}; peak during one prefill "
                       f"{size(self.device_peak_prefill)} (weights included); {s.prompts} bounded records held "
                       f"{size(self.device_peak_records)} (torch.cuda.memory_allocated)")
        else:
            out.append(f"memory                    : weights {size(self.weight_bytes)} (records: their bytes, above)")
        out.append(f"ESTIMATE for a search over {s.instances} instances "
                   f"(scaled linearly from the {s.prompts} measured): "
                   f"prefill {self.prefill_seconds * s.instances:.0f} s once, "
                   f"{self.estimated_candidate_seconds:.2f} s per candidate, "
                   f"{3600 / self.estimated_candidate_seconds:.0f} candidates per hour")
        return out


def timed(device, work: Callable[[], object]) -> tuple[float, object]:
    """``(seconds, work())``, the device synchronized before and after (so a GPU's queued kernels count)."""
    synchronize(device)
    started = time.perf_counter()
    result = work()
    synchronize(device)
    return time.perf_counter() - started, result


def random_prompts(n: int, length: int, vocab: int, seed: int) -> list[torch.Tensor]:
    """``n`` prompts ``[length]`` of token ids drawn uniformly (ids 0-2 left out: often special tokens)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(3, vocab, (length,), generator=generator) for _ in range(n)]


def candidate_allocations(settings: GpuBenchSettings, geometry, floor: int) -> list[np.ndarray]:
    """Random profiles at ``c``; a unit above ``b_max`` (rare: a layer drawn at > 4 c) is cut to it."""
    drawn = random_allocations(settings.candidates, geometry.num_layers, geometry.num_kv_heads, settings.budget, floor,
                               settings.seed)
    return [np.minimum(budgets, settings.b_max) for budgets in drawn]


SCORER = "snapkv"


def check_settings(max_positions: int, settings: GpuBenchSettings) -> None:
    """Refuse (``UserError``) a context beyond the shape's positions or a budget below what SnapKV
    always keeps, before any weight is allocated."""
    from evolalloc.core.errors import UserError
    from evolalloc.runtime.positions import positions_beyond
    from evolalloc.runtime.scorers import get_scorer

    if positions_beyond(max_positions, settings.context, answer=settings.new_tokens):
        raise UserError(f"{settings.context} + {settings.new_tokens} tokens "
                        f"do not fit the shape's {max_positions} positions",
                        field="--context")
    floor = get_scorer(SCORER).min_budget
    if settings.budget < floor:
        raise UserError(f"c = {settings.budget} is below the {floor} tokens {SCORER} always keeps", field="--budget")


def bench_gpu(loaded, shape, settings: GpuBenchSettings, *, log: Callable[[str], None] = lambda m: None,
              profile_path=None) -> GpuBenchResult:
    """Measure (a), (b), (c), prefill speed and record memory on ``loaded`` (``random_model``); with
    ``profile_path``, also profile one batch of (a) and of (c) after the timings (``bench/gpu_profile.py``)."""
    from evolalloc.bench.gpu_shape import weight_bytes
    from evolalloc.runtime.bounded import bound_record
    from evolalloc.runtime.decode import DecodeSettings, generate
    from evolalloc.runtime.prefill import prefill
    from evolalloc.runtime.scorers import get_scorer

    model, geometry, device = loaded.model, loaded.geometry, loaded.device
    check_settings(geometry.max_positions, settings)
    scorer = get_scorer(SCORER)
    decode = DecodeSettings(max_new_tokens=settings.new_tokens)  # no eos ids: every row decodes new_tokens
    prompts = random_prompts(settings.prompts, settings.context, model.config.vocab_size, settings.seed)
    cuda = device.type == "cuda"

    def one_record(ids):
        return prefill(model, ids, [scorer])

    timed(device, lambda: one_record(prompts[0][: min(settings.context, 256)]))  # warm-up: kernels, allocator
    records, prefill_times, whole = [], [], []
    held_before = torch.cuda.memory_allocated(device) if cuda else 0
    peak = 0
    for i, ids in enumerate(prompts):
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
        seconds, record = timed(device, lambda: one_record(ids))
        if cuda:
            peak = max(peak, torch.cuda.max_memory_allocated(device))
        whole.append(record.nbytes())
        records.append(bound_record(record, settings.b_max))
        del record
        prefill_times.append(seconds)
        log(f"prefill {i + 1}/{len(prompts)}: {seconds:.2f} s")
    held = torch.cuda.memory_allocated(device) - held_before if cuda else None

    allocations = candidate_allocations(settings, geometry, scorer.always_kept)
    rows = [(record, budgets) for budgets in allocations for record in records]
    # Warm-up on other allocations than the timed ones: a cache's width (its largest head budget) sets
    # kernel shapes, and a search meets new ones every batch, so per-shape costs stay in the timing.
    others = candidate_allocations(replace(settings, seed=settings.seed + 1), geometry, scorer.always_kept)
    warm = [(record, budgets) for budgets in others for record in records][: settings.batch_size]
    timed(device, lambda: generate(model, warm, scorer, decode, None, settings.batch_size))
    cached, _ = timed(device, lambda: generate(model, rows, scorer, decode, None, settings.batch_size))
    log(f"(a) cached: {cached / settings.candidates:.3f} s per candidate")

    def reprefill(budgets):
        fresh = [one_record(ids) for ids in prompts]  # as a naive harness: whole records, every time
        return generate(model, [(r, budgets) for r in fresh], scorer, decode, None, settings.batch_size)

    count = max(1, min(settings.reprefill_candidates, len(allocations)))
    again, _ = timed(device, lambda: [reprefill(budgets) for budgets in allocations[:count]])
    log(f"(b) re-prefill: {again / count:.3f} s per candidate")

    steps = [settings.new_tokens] * len(rows)
    floor_decode_seconds(model, rows[: settings.batch_size], [2] * min(len(rows), settings.batch_size),
                         settings.batch_size, scorer)  # warm-up
    floor = floor_decode_seconds(model, rows, steps, settings.batch_size, scorer)
    log(f"(c) floor: {floor / settings.candidates:.3f} s per candidate")
    profiled = None
    if profile_path is not None:  # after every timing, so the profiler's overhead touches none
        profiled = _profile(model, rows[: settings.batch_size], scorer, decode, settings, device, profile_path,
                            shape.name)
        log(f"profile: wrote {profile_path}")

    return GpuBenchResult(
        shape=shape.name, layers=shape.layers, full_layers=shape.full_layers, kv_heads=geometry.num_kv_heads,
        head_dim=geometry.head_dim, device=str(device), device_name=device_name(device),
        dtype=str(next(model.parameters()).dtype).removeprefix("torch."), settings=settings,
        prefill_seconds=float(np.mean(prefill_times)), cached_per_candidate=cached / settings.candidates,
        reprefill_per_candidate=again / count, floor_per_candidate=floor / settings.candidates,
        record_bytes_whole=float(np.mean(whole)), record_bytes_bounded=float(np.mean([r.nbytes() for r in records])),
        weight_bytes=weight_bytes(model), device_peak_prefill=peak if cuda else None,
        device_peak_records=held, versions=versions(), profile=profiled,
    )


def _profile(model, rows, scorer, decode, settings: GpuBenchSettings, device, path, shape: str) -> str:
    from evolalloc.bench.gpu_profile import profile_table, write_profiles
    from evolalloc.runtime.decode import generate

    batch = len(rows)
    sections = [
        profile_table(lambda: generate(model, rows, scorer, decode, None, batch), device,
                      title=f"(a) cached: compress + decode, one batch of {batch} rows"),
        profile_table(lambda: floor_decode_seconds(model, rows, [settings.new_tokens] * batch, batch, scorer), device,
                      title=f"(c) floor: stock SDPA + DynamicCache, the same {batch} rows"),
    ]
    header = (f"# bench gpu profile: {shape}, {settings.context} tokens, "
              f"c = {settings.budget}, {settings.new_tokens} new tokens, "
              f"on {device_name(device)} ({device})")
    return write_profiles(path, sections, header)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return platform.processor() or platform.machine() or "cpu"


def versions() -> dict:
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__}
