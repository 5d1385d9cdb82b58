"""``evolalloc export --format lukv``: LUKVPress's [99, layers, kv_heads] prune ratios, replayed
through kvpress's own counting rule (LUKVPress.compress in kvpress 0.5.4/0.5.5) in numpy."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evolalloc.core.allocation import Allocation
from evolalloc.core.baselines.lukv import UtilityCurves
from evolalloc.core.errors import UserError
from evolalloc.core.geometry import ModelGeometry
from evolalloc.export import export_allocation, exporter_for
from evolalloc.export.lukv import lukv_targets, prune_ratios

GEOMETRY = ModelGeometry(num_layers=4, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=4096)


def profile():
    budgets = np.array([[200, 100], [100, 60], [50, 150], [162, 202]])
    return Allocation(model="m", geometry=GEOMETRY, target=128, budgets=budgets, scorer="snapkv", granularity="head",
                      scorer_params={"window": 64, "kernel": 5, "pooling": "avg", "pool_window": False},
                      provenance={"method": "evolved"})


def kvpress_kept(prune: np.ndarray, seq_len: int) -> np.ndarray:
    """Tokens LUKVPress keeps per head of one layer: ``prune`` float32 ``[Hkv]`` (its arithmetic, in float32)."""
    ideal = np.clip(np.float32(1) - prune.astype(np.float32), 0, 1) * np.float32(seq_len)
    heads = len(prune)
    target = int(np.round(ideal.sum(dtype=np.float32)))
    target = max(heads, min(heads * seq_len, target))
    base = np.floor(ideal).astype(np.int64)
    remainder = target - int(base.sum())
    if remainder > 0:
        base[np.argsort(-(ideal - base), kind="stable")[: min(remainder, heads)]] += 1
    return np.clip(base, 1, seq_len)


@pytest.mark.parametrize("n", [997, 1000, 1024, 4096])
def test_kvpress_keeps_exactly_the_budgets_at_the_context_length(n):
    rng = np.random.default_rng(n)
    budgets = rng.integers(1, n + 1, size=(50, 8))
    ratios = prune_ratios(budgets, n)
    assert ratios.dtype == np.float32 and ratios.min() >= 0
    for row, b in zip(ratios, budgets):
        assert kvpress_kept(row, n).tolist() == b.tolist()


def test_the_export_is_lukvs_layout_and_every_row_keeps_its_global_fraction(tmp_path):
    path = export_allocation(profile(), "lukv", tmp_path / "p.npy", context_length=1000)
    curves = np.load(path)
    meta = json.loads(path.with_suffix(".json").read_text())
    assert curves.shape == (99, 4, 2) and curves.dtype == np.float32
    assert meta["press"]["class"] == "SnapKVPress" and meta["press"]["exact"] and meta["lukv"] == {"sink": 0,
                                                                                                   "window": 0}
    for i, target in enumerate(lukv_targets(1000)):
        kept = np.stack([kvpress_kept(curves[i, layer], 1000) for layer in range(4)])
        assert kept.sum() == round(target * 8), i  # row i keeps 1 - (i + 1) / 100 of the prompt
    # Row 87 (c = 120, below the searched 128) is the profile shrunk by the proportional rule, not searched.
    assert 120.0 in [round(t, 6) for t in meta["below_source_target"]]


def test_with_curves_each_row_is_the_lukv_greedy(tmp_path):
    gains = np.array([1.0, 0.5, 0.25, 0.1, 0.05, 0.02, 0.01, 0.005])
    utility = np.stack([np.concatenate([[0], np.cumsum(np.full(1000, g) / (1 + np.arange(1000)))]) for g in gains])
    curves = UtilityCurves(utility.reshape(4, 2, 1001), floor=4, meta={})
    curves.save(tmp_path / "lukv-curves.npz")
    path = export_allocation(profile(), "lukv", tmp_path / "p.npy", context_length=1000,
                             curves=tmp_path / "lukv-curves.npz")
    array = np.load(path)
    for i in (0, 49, 90):
        kept = np.stack([kvpress_kept(array[i, layer], 1000) for layer in range(4)])
        total = round(lukv_targets(1000)[i] * 8)
        assert kept.tolist() == curves.budgets(total).tolist()
    assert "greedy" in json.loads(path.with_suffix(".json").read_text())["rule"]


def test_without_a_context_length_or_with_foreign_curves_it_is_refused(tmp_path):
    with pytest.raises(UserError, match="context_length"):
        exporter_for("lukv")
    UtilityCurves(np.zeros((3, 2, 11)), floor=1).save(tmp_path / "c.npz")
    with pytest.raises(UserError, match="c.npz: utility"):
        exporter_for("lukv", context_length=100, curves=tmp_path / "c.npz").render(profile())
