"""A web page cannot drive a tokenless service on loopback: the Host must name the service (no
DNS rebinding), a write from another Origin is refused, a write's body must be declared YAML or
JSON; and an optional read token guards reads. Each refusal names the header, writes nothing."""

from __future__ import annotations

import httpx
import pytest

from .conftest import TOKEN, ServiceProcess

RECIPE = "task: {name: passkey}\nbudget: {target: 64}\n"


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    service = ServiceProcess(tmp_path_factory.mktemp("browser") / "runs", max_jobs=0,
                             extra=("--allowed-host", "evolalloc.internal")).start()
    yield service
    service.stop()


def jobs(service: ServiceProcess) -> list:
    with service.client() as http:
        return http.get("/jobs").json()["jobs"]


def assert_refused(service, response, status: int, field: str, before: list) -> None:
    assert response.status_code == status, response.text
    assert response.json()["field"] == field and field in response.json()["error"]
    assert jobs(service) == before
    assert [p.name for p in service.runs_dir.iterdir()] == [".service"]


@pytest.mark.parametrize("method, path", [("GET", "/jobs"), ("POST", "/jobs")])
def test_a_foreign_host_is_refused_reads_too(service, method, path):
    before = jobs(service)
    with service.client() as http:  # what a DNS-rebinding page's requests look like: its own name in Host
        response = http.request(method, path, content=RECIPE,
                                headers={"Host": "attacker.example", "Content-Type": "application/yaml"})
    assert_refused(service, response, 421, "Host", before)


def test_a_configured_host_name_is_accepted(service):
    with service.client() as http:
        assert http.get("/jobs", headers={"Host": f"evolalloc.internal:{service.port}"}).status_code == 200


@pytest.mark.parametrize("origin", ["http://attacker.example", "null", "http://127.0.0.1:1"])
def test_a_write_from_another_origin_is_refused(service, origin):
    before = jobs(service)
    with service.client() as http:
        response = http.post("/jobs", content=RECIPE, headers={"Origin": origin, "Content-Type": "application/yaml"})
    assert_refused(service, response, 403, "Origin", before)


def test_a_cross_site_cancel_is_refused_and_the_job_stays_queued(service):
    with service.client() as http:
        job = http.post("/jobs", content=RECIPE, params={"name": "keep"},
                        headers={"Content-Type": "application/yaml"}).json()
        before = jobs(service)
        response = http.post(f"/jobs/{job['id']}/cancel", headers={"Origin": "http://attacker.example"})
        assert_refused(service, response, 403, "Origin", before)
        response = http.post(f"/jobs/{job['id']}/cancel", headers={"Sec-Fetch-Site": "cross-site"})
        assert_refused(service, response, 403, "Origin", before)
        assert http.get(f"/jobs/{job['id']}").json()["status"] == "queued"
        same = http.post(f"/jobs/{job['id']}/cancel", headers={"Origin": service.url})  # the service's own origin
        assert same.status_code == 200 and same.json()["status"] == "cancelled"


@pytest.mark.parametrize("kind, origin", [
    ("text/plain", None), ("application/x-www-form-urlencoded", None), ("multipart/form-data; boundary=x", None),
    (None, "same"),  # a browser's typeless blob, even from the service's own origin
])
def test_a_write_body_must_be_declared_yaml_or_json(service, kind, origin):
    before = jobs(service)
    headers = {"Content-Type": kind} if kind else {}
    if origin:
        headers["Origin"] = service.url
    with service.client() as http:
        response = http.post("/jobs", content=RECIPE, headers=headers)
    assert_refused(service, response, 415, "Content-Type", before)


def test_a_script_without_a_content_type_still_submits(service):
    with service.client() as http:  # curl / httpx with no browser headers
        assert http.post("/jobs", content=RECIPE, params={"name": "script"}).status_code == 201


def test_with_a_read_token_reads_need_a_token_and_the_page_files_stay_open(tmp_path):
    token_file = tmp_path / "read-token"
    token_file.write_text("read-token-0123456789abcdef\n")
    service = ServiceProcess(tmp_path / "runs", max_jobs=0, token=TOKEN,
                             extra=("--read-token-file", str(token_file))).start()
    try:
        with httpx.Client(base_url=service.url) as anonymous:
            response = anonymous.get("/jobs")
            assert response.status_code == 401 and response.json()["field"] == "Authorization"
            assert anonymous.get("/health").json()["read_token_required"] is True
            assert anonymous.get("/").status_code == 200
        with service.client("read-token-0123456789abcdef") as reader:
            assert reader.get("/jobs").status_code == 200
            assert reader.post("/jobs", content=RECIPE).status_code == 401  # a read token does not write
        with service.client(TOKEN) as writer:
            assert writer.get("/jobs").json()["jobs"] == []  # the write token reads too
    finally:
        service.stop()
