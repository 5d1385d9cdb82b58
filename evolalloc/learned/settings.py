"""The settings of tracing and training the learned scorer, defined once (torch-free), so the
``evolalloc scorer`` command line takes its defaults from here instead of repeating them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TraceSettings:
    """What corpus to trace: ``count`` prompts spread over ``tasks`` x ``lengths``."""

    tasks: tuple[str, ...] = ("passkey", "niah_single")
    lengths: tuple[int, ...] = (1024,)
    count: int = 16
    split: str = "search"
    seed: int = 0
    future: int = 32
    splits_per_trace: int = 3
    min_split: int = 128
    votes: int = 0  # SnapKV votes window recorded per split (query-aware gates); 0: none


@dataclass
class TrainConfig:
    steps: int = 1000
    permutations: int = 16
    lr: float = 1e-3
    min_lr: float = 1e-6
    warmup: int = 100
    weight_decay: float = 0.01
    clip: float = 5.0
    hidden: int = 256
    depth: int = 2
    sinks: int = 4
    window: int = 16
    max_tokens: int | None = None
    seed: int = 0
    log_every: int = 10
