"""Starting or joining Ray for the evaluator: resource caps, quiet logs, temp files out of the repo.

``engine.address``:
- ``local`` starts a private Ray on this machine, sized to the workers (CPUs capped at the
  machine's), with a small object store — populations and results are kilobytes — and its
  session files under ``/tmp/evolalloc-ray`` (``EVOLALLOC_RAY_TMP`` moves them), never in the
  repository;
- ``auto`` joins the cluster this process runs in (what ``ray job submit`` gives a job);
- ``ray://host:port`` joins a remote cluster through Ray Client.

Whoever starts Ray shuts it down; a Ray that was already running (a test session, a job's
driver) is used as it is and left running.
"""

from __future__ import annotations

import logging
import math
import os

log = logging.getLogger(__name__)

DEFAULT_TEMP_DIR = "/tmp/evolalloc-ray"
OBJECT_STORE_BYTES = 200 * 1024**2  # the store only ever holds budget arrays and results


def ray_environment() -> None:
    """Environment Ray reads at start-up: no auth token for a private local cluster, no usage stats."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def local_cpus(workers: int, threads: int) -> int:
    """CPUs a local Ray advertises: workers x threads, but never more than the machine has."""
    return max(1, min(workers * threads, os.cpu_count() or 1))


def start_local_ray(num_cpus: int) -> None:
    """A private single-machine Ray with evolalloc's caps (also used by tests and the benchmark)."""
    ray_environment()
    import ray

    ray.init(
        address="local",  # never pick up a RAY_ADDRESS from the environment by accident
        num_cpus=num_cpus,
        num_gpus=None,  # Ray detects GPUs itself
        object_store_memory=OBJECT_STORE_BYTES,
        include_dashboard=False,
        _temp_dir=os.environ.get("EVOLALLOC_RAY_TMP", DEFAULT_TEMP_DIR),
        logging_level=logging.WARNING,
        # Worker output (transformers warnings, tracebacks) stays in the session log files;
        # failures still reach the driver as exceptions carrying the worker's traceback.
        log_to_driver=False,
    )


def connect(address: str, *, workers: int, threads: int) -> bool:
    """Make sure Ray is up for ``address``; True when this call started it (so it must stop it)."""
    if address not in ("local", "auto") and not address.startswith("ray://"):
        raise ValueError(f"engine.address must be local, auto or ray://host:port, got {address!r}")
    ray_environment()
    import ray

    if ray.is_initialized():
        return False
    if address == "local":
        start_local_ray(local_cpus(workers, threads))
        return True
    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    return True


def cluster_gpus() -> float:
    """GPUs the connected cluster has (0 on a CPU-only machine)."""
    import ray

    return float(ray.cluster_resources().get("GPU", 0.0))


def gpus_per_worker(workers: int, gpus: float) -> float:
    """GPUs each actor reserves: a whole one while there are enough, else an equal share of them.

    Workers that each asked for a whole GPU on a one-GPU machine would run one at a time (the
    rest wait for a GPU that never frees); a share lets them all hold the model on the same card
    and overlap their launches, which is where a small model's decode spends its time on a GPU.
    A share must fit on one card, so with several GPUs it is 1 / (workers per card): 4 workers on
    3 GPUs take half a GPU each (0.75 each would leave the fourth waiting on 0.25-GPU remainders).
    Ray counts GPU shares to four decimals, so the share is rounded down to them.
    """
    if gpus <= 0:
        return 0.0
    if gpus >= workers:
        return 1.0
    per_card = math.ceil(workers / math.floor(gpus)) if gpus >= 1 else workers / gpus
    return math.floor(10_000 / per_card) / 10_000


def cpus_per_worker(workers: int, threads: int, owns_local_cluster: bool) -> float:
    """CPUs each actor reserves.

    On a cluster a worker reserves its threads. On a local Ray we sized ourselves, more workers x
    threads than cores is capped, so each actor asks for its share (possibly fractional) —
    otherwise the surplus actors would wait forever for CPUs that do not exist.
    """
    if not owns_local_cluster:
        return float(threads)
    import ray

    total = float(ray.cluster_resources().get("CPU", 1.0))
    share = min(float(threads), total / workers)
    if share < threads:
        log.warning("%d workers x %d threads exceed this machine's %g CPUs: workers will share cores",
                    workers, threads, total)
    return share
