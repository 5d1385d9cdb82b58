"""``evolalloc bench soak`` runs for a few seconds against a real service: jobs submitted, polled,
cancelled and resumed, and ask/tell studies, at once; no answer is a 5xx and no connection breaks.
(A functional check: the figures it prints are not judged here.)"""

from __future__ import annotations

from evolalloc.bench.soak import bench_soak


def test_a_short_soak_meets_no_server_error_and_reads_the_service_memory(tiny_model_dir):
    result = bench_soak(seconds=4, job_clients=2, study_clients=2, generations=1, model=str(tiny_model_dir),
                        max_queued=1, log=lambda _line: None)
    assert result.server_errors == 0 and result.broken == 0, result.lines()
    assert result.jobs_submitted > 0 and result.trials_completed > 0, result.lines()
    assert 200 in result.statuses and 201 in result.statuses
    assert result.rss_start[0] > 0 and result.rss_end[0] > 0  # the service's memory was read (Linux /proc)
    assert any("5xx: 0" in line for line in result.lines())
