"""``--plan`` counts the comparison's re-reading of held-out records spilled beyond the memory free."""

from __future__ import annotations

import pytest

from evolalloc.config.recipe import load_recipe
from evolalloc.pipeline import plan_disk
from evolalloc.pipeline.plan import plan_run
from evolalloc.pipeline.plan_disk import DISK_SHARE, ReReading, read_rate
from tests.pipeline.test_pipeline import tiny_recipe

GB = 10**9


def test_spilled_records_larger_than_the_free_memory_are_read_again_per_cell():
    big = ReReading(cells=36, spilled_bytes=25 * GB, free_bytes=15 * GB, rate=0.5 * GB)
    assert big.applies
    assert big.seconds() == pytest.approx(DISK_SHARE * 36 * 25 / 0.5)  # half the cells' reads reach the disk
    assert big.seconds(1.0) == pytest.approx(36 * 25 / 0.5)  # the upper figure: all of them
    assert "36 comparison cells" in big.line() and "900 GB" in big.line()
    # what the page cache can hold, or no disk measure, or nothing spilled: nothing to add
    for fits in (ReReading(36, 10 * GB, 15 * GB, 0.5 * GB), ReReading(36, 25 * GB, 15 * GB, None),
                 ReReading(36, 0.0, 15 * GB, 0.5 * GB)):
        assert not fits.applies and fits.seconds() == 0.0


def test_the_disk_is_timed_with_a_file_removed_at_once(tmp_path):
    rate = read_rate(1, str(tmp_path))  # clipped up to the smallest file measured
    if rate is None:
        pytest.skip("no posix_fadvise on this platform: the page cache cannot be dropped")
    assert rate > 0 and list(tmp_path.iterdir()) == []


def test_the_plan_adds_the_rereading_when_held_out_records_spill_beyond_free_memory(tmp_path, tiny_model_dir,
                                                                                     monkeypatch):
    engine = {"kind": "local", "threads": 1, "batch_size": 8, "record_memory": "0B"}  # every record spills
    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, engine=engine))
    monkeypatch.setattr(plan_disk, "free_memory", lambda: 0)  # as if the spilled records exceeded the memory free
    plan = plan_run(recipe, tmp_path)
    if plan.rereading.rate is None:
        pytest.skip("no posix_fadvise on this platform")
    assert plan.rereading.cells == 8 and plan.rereading.spilled_bytes == 3 * plan.calibration.record_bytes_bounded
    text = "\n".join(plan.lines())
    assert "spilled records read again" in text and "(up to" in text and "8 comparison cells" in text
    assert [p.name for p in tmp_path.iterdir()] == ["tiny.yaml"]  # the timing file is gone
    # with the memory free to hold them, the plan is as before
    monkeypatch.setattr(plan_disk, "free_memory", lambda: 10**12)
    assert "(up to" not in "\n".join(plan_run(recipe, tmp_path).lines())
