"""Decode-time eviction as a setting: how often the budgets are enforced while the model writes.

A profile's budgets apply to the prompt (compressed once, after the prefill). With a decode setting
they are also *held* while generating: whenever a sequence has had ``interval`` tokens appended since
its last eviction, every (layer, KV head) is cut back to its budget by the scorer, prompt and
generated tokens alike (``runtime/decode_eviction.py``). What "held" means for memory:

* between two forwards a (layer, KV head) stores at most ``budget + interval - 1`` tokens (with
  ``interval = 1``: exactly its budget once the sequence is longer than it);
* during a forward its attention sees those plus the tokens being fed (one while decoding).

``None`` (no setting) is prompt-only eviction: the cache grows by one token per generated token.
This module is the one home of the rule (``interval >= 1``) and of the fitness modes that can use
it; the recipe schema, the allocation file and the runtime take them from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from evolalloc.core.ranges import range_problem
from fitness.task import FITNESS_MODES

INTERVAL_RANGE = {"min": 1}
# Fitness modes whose evaluation can hold the budgets while decoding: every mode today — greedy answers
# (generate, graded) run the decode loop under eviction; likelihood and fidelity teacher-force the
# reference (the full cache's own continuation, for fidelity) in chunks of ``interval`` tokens with the
# same evictions between them (``runtime/held_likelihood.py``). A mode added later that cannot is left
# out here, and ``check_decode_mode`` refuses it in one line.
DECODE_FITNESS_MODES = FITNESS_MODES


@dataclass(frozen=True)
class DecodeEviction:
    """Hold the budgets while decoding: cut every (layer, KV head) back to its budget every ``interval`` tokens."""

    interval: int

    def __post_init__(self):
        if isinstance(self.interval, bool) or not isinstance(self.interval, int):
            raise ValueError(f"decode interval must be an integer, got {self.interval!r}")
        problem = range_problem(self.interval, INTERVAL_RANGE)
        if problem:
            raise ValueError(f"decode interval {problem}")

    def to_dict(self) -> dict:
        return {"interval": self.interval}

    @classmethod
    def of(cls, value) -> "DecodeEviction | None":
        """A setting from ``None`` (prompt-only), an interval, a ``{"interval": N}`` mapping or a setting.
        ``ValueError`` (one line) for anything else or an interval below 1."""
        if value is None or isinstance(value, DecodeEviction):
            return value
        if isinstance(value, dict):
            unknown = sorted(set(value) - {"interval"})
            if unknown or "interval" not in value:
                raise ValueError(f"a decode setting is {{interval: N}}; got keys {sorted(value)}")
            value = value["interval"]
        return cls(interval=value)


def check_decode_mode(decode: DecodeEviction | None, mode: str) -> None:
    """``ValueError`` when a decode setting meets a fitness mode that cannot hold budgets while decoding."""
    if decode is not None and mode not in DECODE_FITNESS_MODES:
        raise ValueError(f"fitness mode {mode!r} cannot hold budgets while decoding (decode interval "
                         f"{decode.interval}); use one of {', '.join(DECODE_FITNESS_MODES)}, or no decode setting")
