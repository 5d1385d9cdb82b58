"""`resume` of a run killed mid-search re-uses the search split's spilled records instead of
prefilling those prompts again (issue 22: a 4k-token prefill is the costly step of a long run)."""

from __future__ import annotations

import json

import pytest

from tests.pipeline.test_pipeline import tiny_recipe
from tests.pipeline.test_pipeline_protocol import base_recipe, curated, judged, load  # noqa: F401 (judged: a fixture)


def test_resume_after_a_kill_reuses_the_spilled_search_records_and_gives_the_same_run(tmp_path, tiny_model_dir,
                                                                                      monkeypatch):
    import evolalloc.runtime.instances as instances_module
    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.engine.local import LocalEvaluator
    from evolalloc.pipeline.run import resume_run, search_run

    # record_memory 0B: every record is spilled to the run folder as soon as it is made; keep_records:
    # left there once the run is finished, so the files can be checked to be the ones first written.
    engine = {"kind": "local", "threads": 1, "batch_size": 8, "record_memory": "0B", "keep_records": True}
    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, engine=engine))

    prefilled: list[str] = []  # uids of the prompts really prefilled, in order
    real_prefill = instances_module.prefill

    def counted_prefill(model, ids, scorers, *, uid, **kwargs):
        prefilled.append(uid)
        return real_prefill(model, ids, scorers, uid=uid, **kwargs)

    monkeypatch.setattr(instances_module, "prefill", counted_prefill)

    # The uninterrupted run, for the scores a resumed run must reproduce.
    whole = create_run_folder(recipe, tmp_path / "whole")
    search_run(whole, recipe, progress=False)

    run = create_run_folder(recipe, tmp_path / "runs")
    real_evaluate, calls = LocalEvaluator.evaluate, {"n": 0}

    def killed_at_third_generation(self, budgets):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # a kill in the middle of the search: its records are on disk
        return real_evaluate(self, budgets)

    monkeypatch.setattr(LocalEvaluator, "evaluate", killed_at_third_generation)
    prefilled.clear()
    with pytest.raises(KeyboardInterrupt):
        search_run(run, recipe, progress=False)
    search_uids = set(prefilled)
    assert len(search_uids) == 2  # the two search prompts, prefilled once each before the kill
    spilled = {p.name: p.stat().st_mtime_ns for p in (run / "records").glob("*.safetensors")}
    assert len(spilled) == 2

    monkeypatch.setattr(LocalEvaluator, "evaluate", real_evaluate)
    prefilled.clear()
    resume_run(run, progress=False)
    assert not search_uids & set(prefilled)  # the search prompts came from their files ...
    assert len(prefilled) == 3  # ... only the three held-out prompts were prefilled
    for name, written in spilled.items():
        assert (run / "records" / name).stat().st_mtime_ns == written  # re-used, not rewritten

    def outputs(folder):
        comparison = json.loads((folder / "comparison.json").read_text())
        profiles = {p.name: json.loads(p.read_text())["budgets"] for p in folder.glob("allocation-c*.json")}
        return comparison["rows"], comparison["instances"], profiles

    assert outputs(run) == outputs(whole)


def test_resume_after_a_kill_reuses_the_records_of_a_curated_search_split(tmp_path, tiny_model_dir, monkeypatch,
                                                                          judged):
    import evolalloc.pipeline.run as run_module
    import evolalloc.runtime.instances as instances_module
    from evolalloc.pipeline.start import prepare_run

    # As runs/ruler4k.yaml: the search split curated (drawn, judged on the full cache, kept), every
    # record spilled (record_memory 0B stands in for 16 records of 180 MiB against 256 MiB).
    recipe = load(tmp_path, base_recipe(
        tiny_model_dir, task=curated(search={"n": 2, "curate": {"full_cache_solves": True, "draw": 5}}),
        budget={"target": 24, "expansions": [48], "expansion_rule": "search"},
        engine={"kind": "local", "threads": 1, "batch_size": 8, "record_memory": "0B"}))
    prefilled: list[str] = []
    real_prefill, real_ship_and_compare = instances_module.prefill, run_module.ship_and_compare

    def counted_prefill(model, ids, scorers, *, uid, **kwargs):
        prefilled.append(uid)
        return real_prefill(model, ids, scorers, uid=uid, **kwargs)

    def killed_after_the_search(*args, **kwargs):
        raise KeyboardInterrupt  # the search is stored; shipping and comparing are not done

    monkeypatch.setattr(instances_module, "prefill", counted_prefill)
    monkeypatch.setattr(run_module, "ship_and_compare", killed_after_the_search)
    prepared = prepare_run(recipe, tmp_path / "runs", progress=False)
    with prepared.experiment, pytest.raises(KeyboardInterrupt):
        run_module.run_prepared(prepared, progress=False)
    run = tmp_path / "runs" / "tiny"
    kept = set(json.loads((run / "curation.json").read_text())["tasks"]["passkey"]["search"]["kept_uids"])
    assert len(kept) == 2 and kept <= set(prefilled)

    monkeypatch.setattr(run_module, "ship_and_compare", real_ship_and_compare)
    prefilled.clear()
    run_module.resume_run(run, progress=False)  # ships by rule `search`: needs the search split's records
    assert (run / "report.md").exists()
    assert not kept & set(prefilled)  # the kept search prompts came from their spilled files
