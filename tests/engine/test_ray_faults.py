"""Faults on the Ray engine, for real: worker processes are SIGKILLed, not simulated."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from evolalloc.engine.local import LocalEvaluator
from evolalloc.engine.ray_engine import RayEvaluator, RayWorkerPool
from evolalloc.search import SearchConfig, run_search
from tests.engine.conftest import allocations, make_instances, make_spec
from tests.engine.faulty_workers import DIE_BUDGET, OOM_BUDGET, FaultyWorker

SEARCH = dict(num_layers=4, num_kv_heads=2, target=24, group_size=2, generations=2, popsize=4,
              min_budget=8, max_budget=200, seed=0)


@pytest.fixture(scope="module")
def two_instances(tiny_loaded, passkey):
    return make_instances(passkey, tiny_loaded.tokenizer, 2, seed=1)


@pytest.fixture(scope="module")
def fault_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def faulty_pool(ray_session, tiny_model_dir, two_instances, snapkv, fault_dir):
    pool = RayWorkerPool(make_spec(tiny_model_dir, [snapkv]), two_instances, workers=2, max_retries=1,
                         worker_class=FaultyWorker, worker_kwargs={"fault_dir": str(fault_dir)})
    yield pool
    pool.close()


class KillOneWorkerDuringCall:
    """Wraps an evaluator; during call number ``at_call`` it SIGKILLs one worker mid-evaluation.

    The workers, cued by ``fault_dir/hold``, announce themselves (``busy-<pid>``) from inside
    their evaluation and wait; a thread here kills the first one announced, then releases the
    others by writing ``killed``. So the kill always lands inside a running evaluation.
    """

    def __init__(self, inner, fault_dir, at_call: int):
        self.inner, self.fault_dir, self.at_call = inner, fault_dir, at_call
        self.calls, self.killed_pid = 0, None

    def evaluate(self, budgets):
        self.calls += 1
        if self.calls != self.at_call:
            return self.inner.evaluate(budgets)
        (self.fault_dir / "hold").write_text("")
        killer = threading.Thread(target=self._kill_first_busy_worker, daemon=True)
        killer.start()
        try:
            return self.inner.evaluate(budgets)
        finally:
            killer.join(timeout=60)
            (self.fault_dir / "hold").unlink()

    def _kill_first_busy_worker(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            busy = sorted(self.fault_dir.glob("busy-*"))
            if busy:
                self.killed_pid = int(busy[0].name.split("-")[1])
                os.kill(self.killed_pid, signal.SIGKILL)
                break
            time.sleep(0.02)
        (self.fault_dir / "killed").write_text("")


def test_killing_a_worker_mid_population_still_completes_the_search_with_every_evaluation_recorded_once(
        tmp_path, faulty_pool, fault_dir, snapkv, tiny_loaded, passkey, two_instances):
    before, restarts = faulty_pool.pids(), faulty_pool.restarts
    evaluator = KillOneWorkerDuringCall(RayEvaluator(faulty_pool, snapkv), fault_dir, at_call=2)
    result = run_search(tmp_path / "ray-run", evaluator, SearchConfig(**SEARCH), progress=False)

    assert evaluator.killed_pid in before  # a real worker process was killed...
    assert faulty_pool.restarts == restarts + 1  # ...and replaced once
    after = faulty_pool.pids()
    assert evaluator.killed_pid not in after and len(set(after) & set(before)) == 1
    history = result.history
    assert len(history) == 2 * 2 * 4
    assert len({r.key for r in history}) == len(history)  # every evaluation recorded once
    assert all(r.state == "COMPLETE" for r in history)
    # The retried shard gave exactly what an undisturbed, in-process search gets.
    local = LocalEvaluator(tiny_loaded, passkey, two_instances, snapkv, batch_size=8)
    reference = run_search(tmp_path / "local-run", local, SearchConfig(**SEARCH), progress=False).history
    assert [(r.key, r.budgets, r.task_score) for r in history] == [(r.key, r.budgets, r.task_score) for r in reference]


def sentinel(value: int) -> np.ndarray:
    budgets = np.full((4, 2), 24)
    budgets[0, 0] = value
    return budgets


def test_a_worker_that_keeps_dying_fails_that_population_and_the_next_one_still_runs(faulty_pool, fault_dir, snapkv,
                                                                                     two_instances):
    evaluator = RayEvaluator(faulty_pool, snapkv)
    restarts = faulty_pool.restarts
    (fault_dir / "mortal").write_text(two_instances[0].uid)
    try:
        doomed = evaluator.evaluate([sentinel(DIE_BUDGET), sentinel(24)])
    finally:
        (fault_dir / "mortal").unlink()
    assert [r.ok for r in doomed] == [False, False]  # the shard never finished: no partial scores
    assert all(r.task_score is None and "died 2 times" in r.error for r in doomed)
    assert faulty_pool.restarts == restarts + 2  # first try + one retry (max_retries=1)
    [fine] = evaluator.evaluate([sentinel(24)])
    assert fine.ok and len(fine.instances) == 2


def test_running_out_of_memory_on_one_instance_is_that_allocations_error_not_a_crash(faulty_pool, snapkv,
                                                                                     two_instances):
    evaluator = RayEvaluator(faulty_pool, snapkv)
    pids, restarts = faulty_pool.pids(), faulty_pool.restarts
    oom, fine = evaluator.evaluate([sentinel(OOM_BUDGET), allocations()[2]])
    assert not oom.ok and "OutOfMemoryError" in oom.error and two_instances[0].uid in oom.error
    assert fine.ok and len(fine.instances) == 2
    assert faulty_pool.pids() == pids and faulty_pool.restarts == restarts  # nobody died
