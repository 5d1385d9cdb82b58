"""Generate-mode batches run instance-block-major: the same batches as allocation-major (so the same
answers), each record decoded for every allocation while it is mapped, not read again per allocation."""

from __future__ import annotations

import evolalloc.engine.local as local
from evolalloc.engine.local import LocalEvaluator, by_instance_block
from tests.engine.conftest import allocations, make_instances


def test_batches_are_ordered_by_their_first_instance_keeping_allocation_order_among_equals():
    keys = [(a, i) for a in range(3) for i in range(4)]  # allocation-major, as _generated_outcomes forms them
    chunks = [keys[s : s + 2] for s in range(0, len(keys), 2)]
    order = by_instance_block(chunks)
    assert [chunks[c] for c in order] == [[(0, 0), (0, 1)], [(1, 0), (1, 1)], [(2, 0), (2, 1)],
                                          [(0, 2), (0, 3)], [(1, 2), (1, 3)], [(2, 2), (2, 3)]]
    # 5 instances in batches of 2: batch 2 straddles allocations 0 and 1 ([(0, 4), (1, 0)]) and keeps its rows;
    # it runs with the block of its lowest instance, 0
    keys = [(a, i) for a in range(2) for i in range(5)]
    straddling = [keys[s : s + 2] for s in range(0, len(keys), 2)]
    assert straddling[2] == [(0, 4), (1, 0)]
    assert by_instance_block(straddling) == [0, 2, 3, 1, 4]


def test_several_allocations_decode_record_by_record_and_answer_as_each_alone(tiny_loaded, passkey, snapkv,
                                                                           monkeypatch):
    instances = make_instances(passkey, tiny_loaded.tokenizer, 4)
    budgets = allocations()[:3]
    evaluator = LocalEvaluator(tiny_loaded, passkey, instances, snapkv, batch_size=2, mode="generate")
    alone = [evaluator.evaluate([b])[0] for b in budgets]
    seen = []  # the instances of each decoded batch, in the order they ran
    generate = local.generate

    def recording(model, rows, *args, **kwargs):
        seen.append([next(j for j, r in enumerate(evaluator.records) if r is row[0]) for row in rows])
        return generate(model, rows, *args, **kwargs)

    monkeypatch.setattr(local, "generate", recording)
    together = evaluator.evaluate(budgets)
    assert seen == [[0, 1]] * 3 + [[2, 3]] * 3  # records 0-1 for every allocation, then 2-3
    assert len({tuple(o.prediction for o in r.instances) for r in alone}) > 1  # the allocations answer differently
    for one, many in zip(alone, together):
        assert [o.prediction for o in one.instances] == [o.prediction for o in many.instances]
        assert [o.uid for o in one.instances] == [o.uid for o in many.instances]


def test_a_failing_batch_is_retried_row_by_row_and_every_generation_stays_with_its_key(tiny_loaded, passkey, snapkv,
                                                                                       monkeypatch):
    instances = make_instances(passkey, tiny_loaded.tokenizer, 3)  # batches of 2 over 2 allocations: one straddles
    budgets = allocations()[:2]
    evaluator = LocalEvaluator(tiny_loaded, passkey, instances, snapkv, batch_size=2, mode="generate")
    alone = [evaluator.evaluate([b])[0] for b in budgets]
    generate = local.generate
    failing = evaluator.records[2]  # instance 2 fails whenever allocation 1 decodes it

    def flaky(model, rows, *args, **kwargs):
        if any(row[0] is failing and row[1] is budgets[1] for row in rows):
            raise RuntimeError("out of memory (simulated)")
        return generate(model, rows, *args, **kwargs)

    monkeypatch.setattr(local, "generate", flaky)
    first, second = evaluator.evaluate(budgets)
    # allocation 0 shares no row with the failure: its answers are its answers alone, in instance order
    assert [o.prediction for o in first.instances] == [o.prediction for o in alone[0].instances]
    assert [o.uid for o in first.instances] == [i.uid for i in instances]
    # allocation 1 failed on instance 2: a failure naming it, never a score
    assert not second.ok and instances[2].uid in second.error and "simulated" in second.error
