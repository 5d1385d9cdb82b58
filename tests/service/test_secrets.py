"""Secrets stay secret: URL passwords never leave the service (responses, log), and the service
token never reaches a child process's environment."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
import yaml

from evolalloc.service.redaction import RedactingFormatter, redact

from .conftest import TOKEN, ServiceProcess

SECRET = "hunter2-db-password"


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.fixture(scope="module")
def with_token(tmp_path_factory):
    service = ServiceProcess(tmp_path_factory.mktemp("secrets") / "runs", max_jobs=0, token=TOKEN).start()
    yield service
    service.stop()


def test_the_service_token_is_not_in_a_child_process_environment(with_token):
    deadline = time.monotonic() + 60
    kids = []
    while not kids and time.monotonic() < deadline:  # the validator helper starts with the service
        kids = children(with_token.process.pid)
        time.sleep(0.2)
    assert kids, "no child process to look at"
    assert TOKEN.encode() in Path(f"/proc/{with_token.process.pid}/environ").read_bytes()  # the check can fail
    for kid in kids:
        environ = Path(f"/proc/{kid}/environ").read_bytes()
        assert TOKEN.encode() not in environ and b"EVOLALLOC_SERVICE_TOKEN" not in environ


def test_a_stored_password_is_hidden_in_every_job_response(with_token):
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from evolalloc.service.db import Job

    # A job stored with a database-server trial store (submissions can no longer name one).
    recipe = {"name": "old", "storage": f"postgresql+psycopg://evolalloc:{SECRET}@db.example/evolalloc"}
    engine = create_engine(f"sqlite:///{with_token.runs_dir / '.service' / 'service.db'}")
    with Session(engine) as session, session.begin():
        session.add(Job(name="old", status="failed", recipe=yaml.safe_dump(recipe), model="m", task="t", engine="local",
                        error=f"could not connect to postgresql://evolalloc:{SECRET}@db.example/evolalloc"))
    engine.dispose()
    with with_token.client(TOKEN) as http:
        listed, one = http.get("/jobs"), http.get("/jobs/1")
        assert one.json()["recipe"]["storage"] == "postgresql+psycopg://evolalloc:***@db.example/evolalloc"
        for response in (listed, one):
            assert response.status_code == 200 and SECRET not in response.text
        refused = http.post("/jobs", content=yaml.safe_dump({**recipe, "name": "new", "task": {"name": "passkey"},
                                                             "budget": {"target": 64}}),
                            headers={"Content-Type": "application/yaml"})
        assert refused.status_code == 422 and SECRET not in refused.text
    assert SECRET not in with_token.log.read_text()


def test_redaction_covers_nested_values_and_log_tracebacks():
    assert redact({"a": [f"mysql://u:{SECRET}@h/x"], "b": 3}) == {"a": ["mysql://u:***@h/x"], "b": 3}
    assert redact("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"
    try:
        raise RuntimeError(f"cannot reach redis://:{SECRET}@cache:6379/0")
    except RuntimeError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None,
                                   exc_info=__import__("sys").exc_info())
    line = RedactingFormatter("%(message)s").format(record)
    assert "redis://:***@cache" in line and SECRET not in line
