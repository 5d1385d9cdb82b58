"""A thin HTTP client of the service, for the CLI and the benchmark (``httpx``).

Every error the service sends is JSON ``{"error": ...}``; ``ServiceError`` carries it with the
HTTP status. The token comes from ``EVOLALLOC_SERVICE_TOKEN`` or a file, as for the server.
"""

from __future__ import annotations

import os

import httpx

SERVICE_ENV = "EVOLALLOC_SERVICE"
DEFAULT_URL = "http://127.0.0.1:8700"


class ServiceError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def service_url(url: str | None) -> str:
    return (url or os.environ.get(SERVICE_ENV) or DEFAULT_URL).rstrip("/")


class Client:
    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 60.0):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = service_url(url)
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)
        self._leases: dict[tuple[int, str], str] = {}  # (trial id, client id) -> lease secret from suggest

    def _call(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as err:
            raise ServiceError(0, f"cannot reach the service at {self.url}: {err}") from None
        if response.status_code >= 400:
            try:
                message = response.json()["error"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:200] or response.reason_phrase
            raise ServiceError(response.status_code, message)
        return response

    def submit(self, recipe_text: str, name: str | None = None) -> dict:
        params = {"name": name} if name else {}
        return self._call("POST", "/jobs", content=recipe_text.encode("utf-8"), params=params,
                          headers={"Content-Type": "application/yaml"}).json()

    def jobs(self) -> list[dict]:
        return self._call("GET", "/jobs").json()["jobs"]

    def job(self, job_id: int) -> dict:
        return self._call("GET", f"/jobs/{job_id}").json()

    def cancel(self, job_id: int) -> dict:
        return self._call("POST", f"/jobs/{job_id}/cancel").json()

    def profiles(self, **filters) -> list[dict]:
        return self._call("GET", "/profiles", params={k: v for k, v in filters.items() if v}).json()["profiles"]

    def profile(self, profile_id: int, *, budget: float | None = None, fmt: str | None = None,
                context_length: int | None = None) -> str:
        params = {"budget": budget, "format": fmt, "context_length": context_length}
        return self._call("GET", f"/profiles/{profile_id}",
                          params={k: v for k, v in params.items() if v is not None}).text

    def register(self, allocation_text: str) -> dict:
        return self._call("POST", "/profiles", content=allocation_text.encode("utf-8"),
                          headers={"Content-Type": "application/json"}).json()

    # -- ask/tell studies (evolalloc.client re-exports these with a worker loop) --------------
    def create_study(self, spec: dict) -> dict:
        return self._call("POST", "/studies", json=spec).json()

    def studies(self) -> list[dict]:
        return self._call("GET", "/studies").json()["studies"]

    def study(self, study_id: int) -> dict:
        return self._call("GET", f"/studies/{study_id}").json()

    def study_trials(self, study_id: int) -> list[dict]:
        return self._call("GET", f"/studies/{study_id}/trials").json()["trials"]

    def suggest(self, study_id: int, client_id: str) -> dict:
        """``{"status": "trial", "trial": {...}}``, ``{"status": "wait", "retry_after": s}`` or
        ``{"status": "finished"}``.

        A trial's lease secret is remembered here, and sent by ``complete`` / ``fail``."""
        answer = self._call("POST", f"/studies/{study_id}/suggest", json={"client_id": client_id}).json()
        if answer.get("status") == "trial":
            self._leases[(answer["trial"]["id"], client_id)] = answer["trial"]["lease"]
        return answer

    def _lease(self, trial_id: int, client_id: str, lease: str | None) -> str:
        return lease or self._leases.get((trial_id, client_id), "-")  # "-": never suggested here; the service says 403

    def complete(self, trial_id: int, client_id: str, task_score: float, metrics: dict | None = None,
                 seconds: float = 0.0, lease: str | None = None, scorer: dict | None = None) -> dict:
        body = {"client_id": client_id, "lease": self._lease(trial_id, client_id, lease), "task_score": task_score,
                "seconds": seconds}
        if metrics is not None:
            body["metrics"] = metrics
        if scorer is not None:  # {name, params, checkpoint}: what ranked the tokens, recorded in the study's profiles
            body["scorer"] = scorer
        return self._call("POST", f"/trials/{trial_id}/complete", json=body).json()

    def fail(self, trial_id: int, client_id: str, error: str, lease: str | None = None) -> dict:
        body = {"client_id": client_id, "lease": self._lease(trial_id, client_id, lease), "error": error}
        return self._call("POST", f"/trials/{trial_id}/fail", json=body).json()

    def close(self) -> None:
        self.http.close()
