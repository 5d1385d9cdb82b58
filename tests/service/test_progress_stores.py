"""The service's read-only trial stores are a bounded cache: old jobs' connections are closed."""

from __future__ import annotations

import optuna

from evolalloc.service import progress


def test_at_most_max_open_stores_stay_open_and_the_oldest_is_closed_first(tmp_path):
    urls = []
    for i in range(progress.MAX_OPEN_STORES + 5):
        url = f"sqlite:///{tmp_path / f'run{i}' / 'study.db'}"
        (tmp_path / f"run{i}").mkdir()
        optuna.create_study(study_name=f"run{i}", storage=url)
        urls.append(url)
    for url in urls:
        progress._storage(url)
    assert progress.open_stores() == progress.MAX_OPEN_STORES
    assert urls[0] not in progress._storages and urls[-1] in progress._storages
    progress.release(tmp_path / "run20", None)  # a job that ended: its store is closed at once
    assert urls[20] not in progress._storages
    assert progress.open_stores() == progress.MAX_OPEN_STORES - 1
    reopened = progress._storage(urls[0])  # a later read opens it again
    assert optuna.load_study(study_name="run0", storage=reopened).trials == []
