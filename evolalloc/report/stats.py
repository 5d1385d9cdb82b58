"""Statistics for ``compare``: a mean with a 95 % bootstrap interval, and paired tests.

The protocol: every method is scored on the *same* held-out instances, so method differences
are tested on per-instance pairs, not on two independent means. For each (evolved, baseline)
pair at a budget we report

- the mean difference with a paired-bootstrap 95 % interval and a two-sided bootstrap p-value
  (resample instances, keep pairs together), and
- the Wilcoxon signed-rank test (scipy) on the per-instance differences.

Task scores are often 0/1 (passkey), so many differences are exactly zero and everything can
tie. The Wilcoxon test drops zero differences (Wilcoxon's own rule); when *all* differences are
zero it has nothing to test, so we report p = 1 and say so in ``PairedTest.note`` instead of
letting scipy raise or return NaN. ``PairedTest.test`` names the test behind ``p_value``.

Bootstrap intervals are percentile intervals from a seeded numpy generator: deterministic, and
well defined for constant data (a constant sample gets the zero-width interval [x, x]), where
BCa would divide by zero.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy import stats as sps

CONFIDENCE = 0.95
RESAMPLES = 10_000


@dataclass(frozen=True)
class Interval:
    """A sample mean with its bootstrap confidence interval ``[low, high]`` over ``n`` values."""

    mean: float
    low: float
    high: float
    n: int
    confidence: float = CONFIDENCE


@dataclass(frozen=True)
class PairedTest:
    """``a`` vs ``b`` on the same instances; ``diff = mean(a - b)``.

    ``p_value`` is the Wilcoxon signed-rank p when it is defined, else the paired-bootstrap p;
    ``test`` says which ("wilcoxon" or "paired-bootstrap"), ``note`` why when it fell back.
    """

    diff: float
    low: float
    high: float
    n: int
    p_bootstrap: float
    p_wilcoxon: float | None
    p_value: float
    test: str
    note: str = ""

    def significant(self, alpha: float = 0.05) -> bool:
        return self.p_value < alpha

    def to_dict(self) -> dict:
        return asdict(self)


def _scores(values: Sequence[float], name: str = "scores") -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contain NaN or infinity; a failed instance is not a score")
    return array


def _resampled_means(values: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Means of ``n_resamples`` resamples (with replacement) of ``values``; ``[n_resamples]``."""
    rng = np.random.default_rng(seed)
    # Chunked so 10k resamples of a few thousand instances never build a huge index matrix.
    means, chunk = [], max(1, 2_000_000 // values.size)
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        means.append(values[rng.integers(0, values.size, size=(size, values.size))].mean(axis=1))
    return np.concatenate(means)


def _percentiles(resampled: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_mean(
    values: Sequence[float], *, confidence: float = CONFIDENCE, n_resamples: int = RESAMPLES, seed: int = 0
) -> Interval:
    """Mean of ``values`` with a percentile bootstrap interval (seeded, so reproducible)."""
    data = _scores(values)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    mean = float(data.mean())
    low, high = _percentiles(_resampled_means(data, n_resamples, seed), confidence)
    # Percentiles of floats can land a hair outside [min, max] of a constant sample; pin them.
    return Interval(mean=mean, low=min(low, mean), high=max(high, mean), n=int(data.size), confidence=confidence)


def _wilcoxon(diffs: np.ndarray) -> tuple[float | None, str]:
    nonzero = int(np.count_nonzero(diffs))
    if nonzero == 0:
        return None, "all differences are zero: nothing for Wilcoxon to test"
    with warnings.catch_warnings():
        # scipy warns that the exact distribution is unavailable with ties/zeros and switches
        # to the normal approximation; that switch is the documented behaviour we want.
        warnings.simplefilter("ignore")
        result = sps.wilcoxon(diffs, zero_method="wilcox", alternative="two-sided")
    p = float(result.pvalue)
    if not math.isfinite(p):
        return None, f"Wilcoxon undefined on {nonzero} non-zero difference(s)"
    return p, ""


def paired_test(
    a: Sequence[float], b: Sequence[float], *, confidence: float = CONFIDENCE, n_resamples: int = RESAMPLES,
    seed: int = 0,
) -> PairedTest:
    """Is ``a`` better or worse than ``b`` on the same instances (``a[i]`` pairs with ``b[i]``)?"""
    first, second = _scores(a, "a"), _scores(b, "b")
    if first.shape != second.shape:
        raise ValueError(f"paired scores need the same instances, got {first.size} and {second.size}")
    diffs = first - second
    resampled = _resampled_means(diffs, n_resamples, seed)
    low, high = _percentiles(resampled, confidence)
    mean = float(diffs.mean())
    # Two-sided bootstrap p: how often a resampled mean difference falls on the other side of
    # zero, doubled; the +1 terms keep it away from an impossible p = 0 with finite resamples.
    below = (np.count_nonzero(resampled <= 0) + 1) / (n_resamples + 1)
    above = (np.count_nonzero(resampled >= 0) + 1) / (n_resamples + 1)
    p_boot = float(min(1.0, 2 * min(below, above)))
    p_wilcoxon, note = _wilcoxon(diffs)
    # Wilcoxon is the headline test; the bootstrap p stands in only where Wilcoxon is undefined
    # (then every difference is zero and the bootstrap p is exactly 1).
    p_value, test = (p_wilcoxon, "wilcoxon") if p_wilcoxon is not None else (p_boot, "paired-bootstrap")
    return PairedTest(
        diff=mean, low=min(low, mean), high=max(high, mean), n=int(diffs.size), p_bootstrap=p_boot,
        p_wilcoxon=p_wilcoxon, p_value=p_value, test=test, note=note,
    )


def align(a: Mapping[str, float], b: Mapping[str, float], names: tuple[str, str] = ("a", "b")) -> tuple[list, list]:
    """Two per-instance score maps (uid -> score) as lists in one instance order.

    ``ValueError`` when they do not cover the same instances: a paired test on mismatched
    instances would compare different prompts.
    """
    missing = sorted(set(a) ^ set(b))
    if missing:
        raise ValueError(f"{names[0]} and {names[1]} were scored on different instances, e.g. {missing[:3]}")
    uids = sorted(a)
    return [a[u] for u in uids], [b[u] for u in uids]
