"""Curation is handed what it reads (issue 37): the split's section, the geometry, the target, the engine
section, a baseline maker and an evaluator maker — not the experiment. Here with plain stand-ins, so the
test says what ``curate`` asks of each piece."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from evolalloc.pipeline.curation import FULL_BUDGET, curate, drawn_slice


def _result(scores: dict[str, float]):
    return SimpleNamespace(ok=True, error=None,
                           instances=[SimpleNamespace(uid=uid, score=score) for uid, score in scores.items()])


def test_curate_judges_slices_with_the_evaluators_it_is_handed_and_keeps_what_only_the_full_cache_solves():
    drawn = [SimpleNamespace(uid=f"u{i}") for i in range(6)]
    full = {"u0": 1.0, "u1": 0.0, "u2": 1.0, "u3": 1.0, "u4": 1.0, "u5": 1.0}
    reference = {"u0": 0.0, "u1": 0.0, "u2": 1.0, "u3": 0.0, "u4": 0.0, "u5": 0.0}
    asked, evaluated, baselines = [], [], []

    class Judge:
        def __init__(self, name):
            self.name = name

        def evaluate(self, budgets):
            evaluated.append([b.copy() for b in budgets])
            start, stop = (0, 2) if self.name == drawn_slice("search", 0, 2, 6) else (2, 4)
            uids = [d.uid for d in drawn[start:stop]]
            return [_result({u: full[u] for u in uids}), _result({u: reference[u] for u in uids})]

    def evaluator(name):
        asked.append(name)
        return Judge(name)

    def baseline(method, target):
        baselines.append((method, target))
        return SimpleNamespace(budgets=np.full((2, 1), 7))

    section = SimpleNamespace(n=2, curate=SimpleNamespace(full_cache_solves=True, reference_unsolved="uniform"))
    record = curate(section, "search", drawn, "passkey", geometry=SimpleNamespace(num_layers=2, num_kv_heads=1),
                    target=64, engine=SimpleNamespace(kind="local", batch_size=2), baseline=baseline,
                    evaluator=evaluator)

    # two slices of engine.batch_size, then it stops: u0 and u3 are kept (u1 unsolved, u2 solved by the reference)
    assert asked == [drawn_slice("search", 0, 2, 6), drawn_slice("search", 2, 4, 6)]
    assert record.kept_uids == ["u0", "u3"] and (record.drawn, record.draw, record.kept) == (4, 6, 2)
    assert baselines == [("uniform", 64.0)] and record.reference_budget == 64.0
    # each slice judged with the full cache, then the reference's budgets
    for budgets in evaluated:
        assert (budgets[0] == FULL_BUDGET).all() and budgets[0].shape == (2, 1) and (budgets[1] == 7).all()
