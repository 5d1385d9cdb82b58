"""Curation judges its drawn candidates a slice at a time and stops once ``n`` are kept
(issue 21.6: the main job's 32nd kept prompt is its 46th of 56): the kept prompts are the ones the
whole draw keeps, in the same order, and a slice is decoded exactly as in the whole draw."""

from __future__ import annotations

import json

import numpy as np

from evolalloc.engine.local import LocalEvaluator
from tests.pipeline.test_pipeline_protocol import base_recipe, curated, index_of, judged, load  # noqa: F401 - fixture


def _recipe(tmp_path, model_dir, n, draw, batch_size, kind="local"):
    return load(tmp_path, base_recipe(model_dir, task=curated(search={"n": n, "curate": {"full_cache_solves": True,
                                                                                         "draw": draw}}),
                                      engine={"kind": kind, "threads": 1, "batch_size": batch_size}))


def test_curation_stops_at_the_nth_kept_and_keeps_what_the_whole_draw_keeps(tmp_path, tiny_model_dir, judged,
                                                                            monkeypatch):
    from evolalloc.pipeline import curation
    from evolalloc.pipeline.experiment import Experiment

    shown = []  # the candidates the judge saw, in order
    evaluate = LocalEvaluator.evaluate
    monkeypatch.setattr(LocalEvaluator, "evaluate",
                        lambda self, budgets: shown.extend(i.uid for i in self.instances) or evaluate(self, budgets))

    # The fake judge: the full cache solves the even draws. 3 wanted, slices of 4: judged 0-3, 4-7.
    experiment = Experiment(_recipe(tmp_path, tiny_model_dir, 3, 24, 4), progress=False,
                            curation_file=tmp_path / "early.json")
    kept = [inst.uid for inst in experiment.instances("search")]
    drawn = experiment.instances("search:drawn")
    assert len(drawn) == 24 and shown == [inst.uid for inst in drawn[:8]]
    stored = json.loads((tmp_path / "early.json").read_text())["tasks"]["passkey"]["search"]
    assert (stored["drawn"], stored["draw"], stored["full_cache_solved"], stored["kept"]) == (8, 24, 4, 3)
    assert (
        "drew 8 of up to 24 (stopped at 3 kept), the full cache solved 4; kept 3"
        in experiment.curations["search"].line()
    )
    # only the judged candidates were prefilled; the kept records are theirs
    assert experiment.records("search") and "search:drawn" not in experiment.splits.records_of

    # The whole draw judged at once (as a Ray engine does) keeps the very same prompts, in order.
    monkeypatch.setattr(curation, "slice_size", lambda engine, total: total)
    shown.clear()
    whole = Experiment(_recipe(tmp_path, tiny_model_dir, 3, 24, 4), progress=False,
                       curation_file=tmp_path / "whole.json")
    assert [inst.uid for inst in whole.instances("search")] == kept
    assert len(shown) == 24 and [index_of(uid) for uid in kept] == [0, 2, 4]
    whole.close()
    experiment.close()


def test_too_few_solved_judges_the_whole_draw(tmp_path, tiny_model_dir, judged):
    from evolalloc.pipeline.experiment import Experiment

    experiment = Experiment(_recipe(tmp_path, tiny_model_dir, 5, 7, 3), progress=False,
                            curation_file=tmp_path / "c.json")
    assert [index_of(inst.uid) for inst in experiment.instances("search")] == [0, 2, 4, 6]
    record = experiment.curations["search"]
    assert (record.drawn, record.draw, record.kept) == (7, 7, 4) and "FEWER than wanted" in record.line()
    experiment.close()


def test_a_slice_is_decoded_exactly_as_in_the_whole_draw(tmp_path, tiny_model_dir):
    """The real greedy decoder on the tiny random Llama: the full cache's answers for candidates
    judged in slices of ``engine.batch_size`` are those of the whole draw, token for token."""
    from evolalloc.pipeline.curation import FULL_BUDGET
    from evolalloc.pipeline.experiment import Experiment, drawn_slice

    experiment = Experiment(_recipe(tmp_path, tiny_model_dir, 2, 6, 3), progress=False)
    full = [np.full((experiment.geometry.num_layers, experiment.geometry.num_kv_heads), FULL_BUDGET, dtype=np.int64)]
    whole = experiment.evaluator("search:drawn").evaluate(full)[0].instances
    sliced = [o for start in (0, 3)
              for o in experiment.evaluator(drawn_slice("search", start, start + 3, 6)).evaluate(full)[0].instances]
    assert [o.uid for o in sliced] == [o.uid for o in whole]
    assert [(o.prediction, o.score, o.generated_tokens) for o in sliced] == [(o.prediction, o.score, o.generated_tokens)
                                                                             for o in whole]
    assert any(o.generated_tokens for o in whole)  # something was decoded
    experiment.close()


def test_candidates_not_kept_leave_the_temporary_folder_once_curation_decides(tmp_path, tiny_model_dir, judged):
    """Before the run folder exists (``prepare_run``), the drawn candidates spill to a temporary
    folder: those curation does not keep are deleted as soon as it decides, not when the run ends
    (a kill in between used to leave them there)."""
    from pathlib import Path

    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.runtime.spill import MappedLayers

    recipe = load(tmp_path, base_recipe(tiny_model_dir,
                                        task=curated(search={"n": 2, "curate": {"full_cache_solves": True, "draw": 6}},
                                                                       context_tokens=400),  # longer than b_max
                                        engine={"kind": "local", "threads": 1, "batch_size": 8,
                                                "record_memory": "1GiB"}))
    experiment = Experiment(recipe, progress=False)  # no curation file: no run folder yet
    experiment.instances("search")
    folder = Path(experiment.keeper._temporary.name)
    assert sorted(index_of(uid) for uid in experiment.curations["search"].kept_uids) == [0, 2]
    assert len(list(folder.glob("*.safetensors"))) == 2  # 6 judged, 4 deleted
    kept = experiment.records("search")  # the kept ones still read back from their files
    assert [index_of(r.uid) for r in kept] == [0, 2] and all(r.keys[0].numel() for r in kept)
    # Bounded below their length, the kept records are new ones: the whole drawn files go too.
    assert all(r.bound is not None and r.bound < r.length for r in kept)
    in_folder = {Path(r.keys.mapping.path).name for r in kept if isinstance(r.keys, MappedLayers)}
    assert {p.name for p in folder.glob("*.safetensors")} == in_folder
    experiment.close()
    assert not folder.exists()
