"""Fixtures for the engine tests: a tiny model folder, its instances, and one shared local Ray.

Ray starts once per test session (about 5 s and 1 GB here) with 2 CPUs, as on this machine;
every Ray test uses that session, so worker actors are the only per-test start-up cost.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evolalloc.engine.ray_worker import WorkerSpec

CONTEXT_TOKENS = 200


@pytest.fixture(scope="session")
def tiny_loaded(tiny_model_dir):
    import torch

    from evolalloc.runtime.model import load_model

    # The workers run single-threaded; so does the local reference they are compared with.
    torch.set_num_threads(1)
    return load_model(str(tiny_model_dir))


@pytest.fixture(scope="session")
def passkey():
    from fitness import get_task

    return get_task("passkey")


@pytest.fixture(scope="session")
def snapkv():
    from evolalloc.runtime.scorers import get_scorer

    return get_scorer("snapkv", window=8)


def make_instances(task, tokenizer, n: int, seed: int = 0):
    return task.instances("search", n, seed, CONTEXT_TOKENS, tokenizer)


def make_spec(model_dir: Path, scorers, batch_size: int = 8) -> WorkerSpec:
    """A worker spec without instances (the pool fills in each shard's)."""
    return WorkerSpec(model=str(model_dir), dtype="float32", threads=1, task="passkey", task_params={},
                      instances=[], scorers=list(scorers), batch_size=batch_size)


def allocations(num_layers: int = 4, num_kv_heads: int = 2) -> list[np.ndarray]:
    """Tight, uneven, per-head and roomy budgets: different kept sets, so different decodes."""
    shape = (num_layers, num_kv_heads)
    uneven = np.array([[40, 8], [24, 24], [12, 30], [16, 16]])[:num_layers, :num_kv_heads]
    return [np.full(shape, 8), uneven, np.full(shape, 24), np.full(shape, 4096)]


@pytest.fixture(scope="session")
def ray_session(tmp_path_factory):
    """One local Ray for the whole test session (2 CPUs), shut down at the end."""
    import ray
    from ray import cloudpickle

    import tests.engine.faulty_workers as faulty_workers
    from evolalloc.engine.ray_cluster import start_local_ray

    # Ship the test-only worker classes by value: Ray workers need not import the tests package.
    cloudpickle.register_pickle_by_value(faulty_workers)
    start_local_ray(num_cpus=2)
    yield ray
    ray.shutdown()
