"""Starting Ray for the evaluator: resource caps and addresses (no Ray is started here)."""

from __future__ import annotations

import pytest


def test_a_local_ray_never_advertises_more_cpus_than_the_machine_has():
    import os

    from evolalloc.engine.ray_cluster import local_cpus

    assert local_cpus(1, 1) == 1
    assert local_cpus(64, 4) == (os.cpu_count() or 1)


def test_an_unknown_ray_address_is_refused_before_touching_ray():
    from evolalloc.engine.ray_cluster import connect

    with pytest.raises(ValueError, match="local, auto or ray://"):
        connect("http://head:8265", workers=1, threads=1)


@pytest.mark.parametrize("workers, gpus, share", [
    (1, 0, 0.0), (2, 0, 0.0),         # no GPU: none asked for
    (1, 1, 1.0), (2, 2, 1.0), (2, 8, 1.0),  # enough GPUs: a whole one each
    (2, 1, 0.5), (3, 1, 0.3333),      # one card shared
    (4, 3, 0.5), (3, 2, 0.5),         # several cards: a share that fits on one card
])
def test_workers_share_the_gpus_so_that_none_waits_for_a_card(workers, gpus, share):
    from evolalloc.engine.ray_cluster import gpus_per_worker

    got = gpus_per_worker(workers, gpus)
    assert got == share
    # every worker finds room: the cards, each filled with whole shares, hold them all
    if gpus:
        assert int(gpus) * int(1 / got + 1e-9) >= workers
