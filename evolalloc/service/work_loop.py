"""The client side of ask/tell: suggest, evaluate, complete (or fail), until the study ends.

Public as ``evolalloc.client.work``; ``evolalloc worker`` runs it with evolalloc's own runtime
(``remote_worker.py``). It lives in this package so the service's own worker and the public
client share one loop without the service importing the module above it.
"""

from __future__ import annotations

import math
import time
import traceback
from typing import Callable

import numpy as np

from evolalloc.service.client import Client


def work(client: Client, study_id: int, client_id: str, evaluate: Callable[[np.ndarray], float], *,
         max_trials: int | None = None, on_trial: Callable[[dict, dict], None] | None = None,
         scorer: dict | None = None) -> int:
    """Suggest, evaluate, complete (or fail) until the study is finished; the trials this client ran.

    ``evaluate(budgets)`` gets an int64 array ``[num_layers, num_kv_heads]``. An exception or a
    non-finite score is reported with ``POST /trials/{id}/fail`` and the loop goes on. ``scorer``
    (``{name, params, checkpoint}``) goes with every result: the study's profiles record it.
    """
    done = 0
    while max_trials is None or done < max_trials:
        answer = client.suggest(study_id, client_id)
        if answer["status"] == "finished":
            break
        if answer["status"] == "wait":
            time.sleep(float(answer.get("retry_after", 0.2)))
            continue
        trial = answer["trial"]
        started = time.perf_counter()
        try:
            score = float(evaluate(np.asarray(trial["budgets"], dtype=np.int64)))
            error = None if math.isfinite(score) else f"non-finite task score {score!r}"
        except Exception as err:  # noqa: BLE001 - any failure of the evaluator is a FAIL trial
            score, error = None, "".join(traceback.format_exception_only(type(err), err)).strip()
        if error is None:
            reply = client.complete(trial["id"], client_id, score, seconds=time.perf_counter() - started, scorer=scorer)
        else:
            reply = client.fail(trial["id"], client_id, error)
        if on_trial is not None:
            on_trial(trial, reply)
        done += 1
    return done
