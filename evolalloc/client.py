"""The Python client of evolalloc's ask/tell service: the optimizer runs on the service, you evaluate.

Example (any evaluator: your model, your hardware, your metric)::

    from evolalloc.client import Client, work

    client = Client("http://127.0.0.1:8700")
    study = client.create_study({"geometry": {"num_layers": 30, "num_kv_heads": 3}, "target": 128})
    work(client, study["id"], "gpu-node-1", lambda budgets: my_score(budgets))  # until the study ends

``budgets`` is a ``[num_layers][num_kv_heads]`` list of ints; return a finite task score, or raise
to report the trial as failed (never a made-up score). Several processes or machines may run
``work`` on the same study at once: each gets its own candidates of the current generation.
"""

from evolalloc.service.client import Client, ServiceError
from evolalloc.service.work_loop import work

__all__ = ["Client", "ServiceError", "work"]
