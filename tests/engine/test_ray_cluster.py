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
