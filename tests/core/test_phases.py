"""The phase clock: each change of phase noted with its time, the seconds between changes the earlier phase's."""

from __future__ import annotations

import pytest

from evolalloc.core import phases


@pytest.fixture
def clock(monkeypatch):
    """A fake ``time.time`` the test moves by hand, and a fresh record of changes."""
    now = [1000.0]
    monkeypatch.setattr(phases.time, "time", lambda: now[0])
    monkeypatch.setattr(phases, "_changes", type(phases._changes)(maxlen=100))
    return now


def test_time_between_announcements_is_the_earlier_phases(clock):
    since = clock[0]
    clock[0] += 3  # imports and checks: before any announcement
    phases.announce("prefilling", 0, 2)
    clock[0] += 5
    phases.announce("prefilling", 1, 2)  # the same phase again: no change
    clock[0] += 5
    phases.announce("searching")
    clock[0] += 20
    phases.announce("prefilling", 0, 4)  # entered again: its seconds add up
    clock[0] += 2
    assert phases.spent(since) == {"starting": 3.0, "prefilling": 12.0, "searching": 20.0}
    assert list(phases.spent(since)) == ["starting", "prefilling", "searching"]  # the order first entered
    assert phases.spent(since, now=since + 10) == {"starting": 3.0, "prefilling": 7.0}


def test_changes_before_the_start_belong_to_another_run(clock):
    phases.announce("comparing")  # a run before this one, in the same process (--seeds, evolalloc serve)
    clock[0] += 100
    since = clock[0]
    clock[0] += 4
    phases.announce("searching")
    clock[0] += 6
    assert phases.spent(since) == {"starting": 4.0, "searching": 6.0}
