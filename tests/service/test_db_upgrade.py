"""A service database made before a column was added keeps its jobs: opening it adds the missing
columns (``create_all`` makes missing tables only), so an upgraded service starts on it."""

from __future__ import annotations

from sqlalchemy import inspect, text

from evolalloc.service.db import Job, make_engine, make_sessions

ADDED = ("phase_done", "phase_total", "phase_since", "estimated_seconds", "submitter")  # issue 34's columns


def test_a_database_without_the_new_job_columns_gets_them_and_keeps_its_jobs(tmp_path):
    url = f"sqlite:///{tmp_path / 'service.db'}"
    engine = make_engine(url)
    with make_sessions(engine).begin() as session:
        session.add(Job(name="old", status="finished", recipe="{}", model="m", task="passkey", engine="local"))
    with engine.begin() as connection:  # the database as the previous version made it
        for column in ADDED:
            connection.execute(text(f"ALTER TABLE jobs DROP COLUMN {column}"))
    engine.dispose()
    assert not set(ADDED) & {c["name"] for c in inspect(make_engine_raw(url)).get_columns("jobs")}

    upgraded = make_engine(url)
    assert set(ADDED) <= {c["name"] for c in inspect(upgraded).get_columns("jobs")}
    with make_sessions(upgraded)() as session:
        job = session.query(Job).one()
        assert job.name == "old" and job.to_dict()["phase_done"] is None and job.submitter is None


def make_engine_raw(url: str):
    from sqlalchemy import create_engine

    return create_engine(url)
