"""Unknown ids are 404 everywhere (issue 34: ``POST /studies/does-not-exist/suggest`` was a 422, where
every other unknown id answered 404). The routes come from the application's own route table, so a
route added later is walked too; each is asked with an id that does not exist and with one that
cannot (not a number), with no body and with a body, against the real server."""

from __future__ import annotations

import re

import pytest
from fastapi.routing import APIRoute

from .conftest import ServiceProcess


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    service = ServiceProcess(tmp_path_factory.mktemp("ids") / "runs", max_jobs=0).start()
    yield service
    service.stop()


def api_routes(routes):
    """Every ``APIRoute``, inside included routers too (FastAPI >= 0.16x keeps those as a wrapper of
    the router; none of ours has a prefix)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif hasattr(route, "original_router"):
            yield from api_routes(route.original_router.routes)


def routes_with_ids(tmp_path) -> list[tuple[str, str]]:
    """``(method, path template)`` of every route of the app that takes an id in its path."""
    from evolalloc.service.app import create_app, open_service
    from evolalloc.service.settings import make_settings

    service = open_service(make_settings(runs_dir=tmp_path / "table-only"))  # its route table; never served
    try:
        app = create_app(service)
        return [(method, route.path) for route in api_routes(app.routes) if "{" in route.path
                for method in sorted(route.methods) if method != "HEAD"]
    finally:
        service.lock_handle.close()


def test_every_route_answers_an_unknown_id_with_a_404(service, tmp_path):
    routes = routes_with_ids(tmp_path)
    assert ("POST", "/studies/{study_id}/suggest") in routes and ("GET", "/jobs/{job_id}") in routes  # the walk is real
    wrong = []
    with service.client() as http:
        for method, template in routes:
            for unknown in ("999999", "does-not-exist"):
                path = re.sub(r"\{[^}]+\}", unknown, template)
                for body in (None, {}, {"client_id": "x", "task_score": 0.5, "lease": "y", "error": "z"}):
                    response = http.request(method, path, json=body) if body is not None else http.request(method, path)
                    if response.status_code != 404 or set(response.json()) != {"error"}:
                        wrong.append(f"{method} {path} body={body}: {response.status_code} {response.text[:120]}")
    assert not wrong, "\n".join(wrong)
