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
    # a batch that straddles two allocations (4 instances, batches of 3) keeps its rows; it runs by its first
    straddling = [keys[s : s + 3] for s in range(0, len(keys), 3)]
    assert sorted(by_instance_block(straddling)) == list(range(4))
    assert [min(i for _, i in straddling[c]) for c in by_instance_block(straddling)] == [0, 0, 0, 1]


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
