"""A static export of a method that picks its budgets per input is refused (issue 21): the global
gates, AdaKV, CAKE and the hybrid's prior only run as evaluated inside evolalloc's runtime, so
``evolalloc export`` names the file and the provenance field in one line and writes nothing; the
json file (the allocation itself) still exports, and a static profile exports to every format."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import save_allocation
from evolalloc.core.geometry import ModelGeometry
from tests.clitools import assert_refused, run_cli

GEOMETRY = ModelGeometry(num_layers=4, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=4096)
STATIC_FORMATS = ["kvpress", "headkv", "curve", "lukv", "trtllm"]
OPTIONS = {fmt: ["--context-length", "512"] for fmt in ("kvpress", "curve", "lukv")}  # headkv, trtllm take none
PER_INPUT = {  # method, scorer, extra provenance -> the field the refusal names
    "gates": ("gates", "gates", {}, "$.provenance.method"),
    "adakv": ("evolved+adakv", "snapkv", {}, "$.provenance.method"),
    "cake": ("cake", "snapkv", {}, "$.provenance.method"),
    "hybrid": ("evolved", "gates", {"adapter": "gate_prior"}, "$.provenance.adapter"),
    "floors": ("evolved", "gates", {"adapter": "gate_floors", "adapter_params": {"floor_fraction": 0.5}},
               "$.provenance.adapter"),
}


def write_profile(tmp_path, method="evolved", scorer="snapkv", **provenance) -> str:
    budgets = np.repeat(np.array([[40], [24], [20], [36]]), 2, axis=1)  # per layer: trtllm takes it too
    allocation = Allocation(model="m", geometry=GEOMETRY, target=float(budgets.mean()), budgets=budgets, scorer=scorer,
                            granularity="layer", provenance={"method": method, **provenance})
    path = tmp_path / f"{method}-{scorer}.json"
    save_allocation(allocation, path)
    return str(path)


@pytest.mark.parametrize("fmt", STATIC_FORMATS)
@pytest.mark.parametrize("kind", sorted(PER_INPUT))
def test_a_static_export_of_a_per_input_method_is_one_line_naming_the_file_and_field(tmp_path, kind, fmt):
    method, scorer, provenance, field = PER_INPUT[kind]
    path = write_profile(tmp_path, method, scorer, **provenance)
    out = tmp_path / "out" / f"exported.{fmt}"
    out.parent.mkdir()
    line = assert_refused(run_cli("export", path, "--format", fmt, *OPTIONS.get(fmt, []), "-o", str(out)),
                          source=path, field=field, phrase="per input")
    assert f"cannot export to {fmt}" in line and "json" in line
    assert list(out.parent.iterdir()) == []  # no main file, no sidecar
    assert_refused(run_cli("export", path, "--format", fmt, *OPTIONS.get(fmt, [])), source=path, field=field)


@pytest.mark.parametrize("kind", sorted(PER_INPUT))
def test_the_json_export_keeps_what_the_runtime_applies(tmp_path, kind):
    method, scorer, provenance, _ = PER_INPUT[kind]
    path = write_profile(tmp_path, method, scorer, **provenance)
    done = run_cli("export", path, "--format", "json")
    assert done.code == 0, done.stderr
    exported = json.loads(done.stdout)
    assert exported["provenance"]["method"] == method and exported["scorer"] == scorer
    assert exported["provenance"].get("adapter") == provenance.get("adapter")
    assert exported["provenance"].get("adapter_params") == provenance.get("adapter_params")


@pytest.mark.parametrize("fmt", STATIC_FORMATS)
def test_a_static_profile_still_exports_to_every_format(tmp_path, fmt):
    path = write_profile(tmp_path, scorer="window" if fmt == "trtllm" else "snapkv")  # trtllm keeps recent tokens only
    out = tmp_path / f"exported.{fmt}"
    done = run_cli("export", path, "--format", fmt, *OPTIONS.get(fmt, []), "-o", str(out))
    assert done.code == 0, done.stderr
    assert out.exists()
