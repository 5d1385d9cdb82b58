"""The checks the HTTP process cannot run itself: task and scorer names against their registries,
and the model: it must exist and ``task.context_tokens`` must fit its positions (its config only);
and an ask/tell study's model geometry (``{"geometry": spec}`` -> ``{"ok": true, "geometry": {...}}``).

The scorer registry imports torch (~3 s, ~300 MB); the HTTP process must stay light. So one
helper process (``python -m evolalloc.service.validator``) imports it once and answers checks
over its stdin/stdout, one JSON line each way:

    -> {"recipe": {...the recipe as a dict...}}
    <- {"ok": true, "geometry": {...}}   or   {"ok": false, "message": "...", "field": "scorer.name"}

(the geometry of the recipe's model, from its config: the HTTP process caps a job's cells with it)

``Validator`` is the HTTP side: started on first use (or at start-up, to warm it), one request
at a time, restarted if it dies. The answer is ``recipe_from_dict(..., check_names=True)``'s,
so the service refuses exactly what ``evolalloc search`` refuses.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading

from evolalloc.core.errors import UserError
from evolalloc.service.redaction import without_secrets

TIMEOUT_SECONDS = 60.0


class Validator:
    def __init__(self):
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None

    def start(self) -> None:
        with self._lock:
            self._ensure()

    def _ensure(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            env = {**without_secrets(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
            self._process = subprocess.Popen(
                [sys.executable, "-m", "evolalloc.service.validator"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True, env=env, start_new_session=True)
        return self._process

    def check(self, recipe_dict: dict, source: str) -> dict:
        """``UserError`` (naming ``source`` and the field) if a name in the recipe is unknown, or its
        model has no readable config; else the model's geometry (a ``ModelGeometry`` dict)."""
        return self._ask({"recipe": recipe_dict}, source)["geometry"]

    def geometry(self, spec: str, source: str) -> dict:
        """A model spec's ``ModelGeometry`` as a dict, from its config alone (any spec the CLI takes)."""
        return self._ask({"geometry": spec}, source)["geometry"]

    def _ask(self, request: dict, source: str) -> dict:
        with self._lock:
            for attempt in (1, 2):
                process = self._ensure()
                try:
                    process.stdin.write(json.dumps(request) + "\n")
                    process.stdin.flush()
                    ready, _, _ = select.select([process.stdout], [], [], TIMEOUT_SECONDS)
                    line = process.stdout.readline() if ready else ""
                except (BrokenPipeError, OSError):
                    line = ""
                if line:
                    break
                self._stop_locked()
                if attempt == 2:
                    raise RuntimeError("the recipe validator process did not answer")
        answer = json.loads(line)
        if not answer["ok"]:
            raise UserError(answer["message"], source=source, field=answer.get("field"))
        return answer

    def _stop_locked(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def stop(self) -> None:
        with self._lock:
            self._stop_locked()


def _serve() -> None:  # pragma: no cover - runs in the helper process
    from evolalloc.config.recipe import recipe_from_dict
    from evolalloc.pipeline.start import check_context_fits
    from evolalloc.runtime import scorers  # noqa: F401  - the slow import, once, before the first request
    from evolalloc.runtime.model import model_geometry

    for line in sys.stdin:
        request = json.loads(line)
        try:
            if "geometry" in request:  # an ask/tell study's model spec: its shape, from its config
                answer = {"ok": True, "geometry": model_geometry(request["geometry"]).to_dict()}
            else:
                recipe = recipe_from_dict(request["recipe"], source="", check_names=True)
                check_context_fits(recipe)  # the model's config only (no weights): a missing model is a 422 too
                answer = {"ok": True, "geometry": model_geometry(recipe.model.spec).to_dict()}  # cells: dtype aside
        except UserError as err:
            answer = {"ok": False, "message": _bare_message(err), "field": err.field}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def _bare_message(err: UserError) -> str:
    """The message without the ``field: `` prefix ``UserError`` adds (the caller adds its own)."""
    text = str(err)
    prefix = f"{err.field}: " if err.field else ""
    return text[len(prefix):] if prefix and text.startswith(prefix) else text


if __name__ == "__main__":
    _serve()
