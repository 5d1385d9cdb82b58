"""A finished run leaves no prefill records unless asked (``engine.keep_records``, ``evolalloc clean``),
and its report's wall time is the whole run's: every session, from the start's checks to the report."""

from __future__ import annotations

import json
import os
import time
from collections import deque

import pytest

from evolalloc.config.run_folder import RECORDS_FOLDER, SESSIONS_FILE
from evolalloc.core import phases
from evolalloc.pipeline.wall_clock import begin_session, end_session, phase_seconds, sessions_of

from .test_pipeline import evolalloc, tiny_recipe

SPILL_ALL = {"kind": "local", "threads": 1, "batch_size": 8, "record_memory": "0B"}  # every record spilled to records/


def _run(tmp_path, tiny_model_dir, **engine):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.start import start_run

    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, engine={**SPILL_ALL, **engine},
                                     optimizer={"name": "cma", "generations_per_group": 1, "popsize": 3}))
    # started an hour ago: as if the start (checks, model load, curation) had taken an hour
    return start_run(recipe, tmp_path / "runs", progress=False, started=time.time() - 3600).run_dir


def test_a_finished_run_removes_its_records_and_its_wall_time_counts_the_start(tmp_path, tiny_model_dir,
                                                                              monkeypatch):
    # as in a fresh process: the phases other tests announced within the hour the start is set back over are not its
    monkeypatch.setattr(phases, "_changes", deque(maxlen=100))
    run = _run(tmp_path, tiny_model_dir)
    assert not (run / RECORDS_FOLDER).exists()
    assert "Wall time: 1 h 00 min" in (run / "report.md").read_text()  # the hour of the start is counted
    [session] = sessions_of(run)
    assert session["ended"] - session["started"] >= 3600 and not session.get("killed")
    # where the time went: the hour before the first announcement is the start's, then the run's phases in order
    went = session["phases"]
    assert list(went)[:1] == ["starting"] and went["starting"] >= 3600
    assert {"prefilling", "searching", "shipping", "comparing"} <= set(went)
    assert sum(went.values()) == pytest.approx(session["ended"] - session["started"], abs=1.0)
    assert "Where it went: starting 1 h 00 min" in (run / "report.md").read_text()


def test_keep_records_keeps_them_and_clean_removes_them_saying_the_bytes_freed(tmp_path, tiny_model_dir):
    run = _run(tmp_path, tiny_model_dir, keep_records=True)
    files = [p for p in (run / RECORDS_FOLDER).rglob("*") if p.is_file()]
    assert files  # the search and held-out prompts, spilled
    size = sum(p.stat().st_size for p in files)
    done = evolalloc("clean", str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"freed {size} bytes" in done.stdout
    assert not (run / RECORDS_FOLDER).exists()
    again = evolalloc("clean", str(run), cwd=tmp_path)
    assert again.returncode == 0 and "no prefill records" in again.stdout


def test_clean_refuses_an_unfinished_run_without_force(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import create_run_folder

    run = create_run_folder(load_recipe(tiny_recipe(tmp_path, tiny_model_dir)), tmp_path / "runs")
    (run / RECORDS_FOLDER).mkdir()
    (run / RECORDS_FOLDER / "a.safetensors").write_bytes(b"x" * 10)
    refused = evolalloc("clean", str(run), cwd=tmp_path)
    assert refused.returncode == 2 and "not finished" in refused.stderr and "Traceback" not in refused.stderr
    assert (run / RECORDS_FOLDER / "a.safetensors").is_file()
    forced = evolalloc("clean", str(run), "--force", cwd=tmp_path)
    assert forced.returncode == 0 and "freed 10 bytes" in forced.stdout


def test_a_killed_session_ends_at_its_last_write_and_the_gap_before_resume_is_not_counted(tmp_path):
    begin_session(tmp_path, started=1000.0)
    trace = tmp_path / "study.db"
    trace.write_text("trials")
    os.utime(trace, (1030.0, 1030.0))  # the killed session's last write, 30 s after it began
    begin_session(tmp_path, started=5000.0)  # resumed long after the kill
    assert end_session(tmp_path, now=5010.0) == pytest.approx(30.0 + 10.0)
    first, second = json.loads((tmp_path / SESSIONS_FILE).read_text())
    assert first == {"started": 1000.0, "ended": 1030.0, "killed": True}  # a killed session knows no phases
    assert second == {"started": 5000.0, "ended": 5010.0, "phases": {"starting": 10.0}}
    assert phase_seconds(tmp_path) == ({"starting": 10.0}, False)  # the killed session's time is not in it


def test_a_session_begun_without_its_phases_records_none_and_the_breakdown_says_it_is_partial(tmp_path):
    begin_session(tmp_path, started=time.time() - 100, by_phase=False)  # set back over other runs' work
    end_session(tmp_path)
    [session] = sessions_of(tmp_path)
    assert "phases" not in session and session["by_phase"] is False
    assert phase_seconds(tmp_path) == ({}, False)


def test_phase_seconds_add_up_over_sessions_that_ended(tmp_path):
    assert phase_seconds(tmp_path) == ({}, False)  # no session at all
    sessions = [{"started": 0.0, "ended": 50.0, "phases": {"starting": 5.0, "searching": 45.0}},
                {"started": 90.0, "ended": 100.0, "phases": {"searching": 4.0, "comparing": 6.0}}]
    (tmp_path / SESSIONS_FILE).write_text(json.dumps(sessions))
    assert phase_seconds(tmp_path) == ({"starting": 5.0, "searching": 49.0, "comparing": 6.0}, True)


def test_a_run_folder_from_before_the_clock_counts_only_the_closing_moment(tmp_path):
    now = time.time()
    assert end_session(tmp_path, now=now) == 0.0
    assert sessions_of(tmp_path) == [{"started": now, "ended": now, "phases": {"starting": 0.0}}]
