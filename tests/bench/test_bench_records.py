"""``bench records`` measures what it says: float32 bounded records change nothing, 16-bit ones are smaller."""

from __future__ import annotations


def test_bench_records_prints_sizes_and_score_changes(tiny_model_dir):
    import torch

    from evolalloc.bench.records import bench_records
    from evolalloc.runtime.model import load_model

    torch.set_num_threads(1)
    loaded = load_model(str(tiny_model_dir))
    result = bench_records(loaded, prompts=2, context_tokens=200, budgets=(40, 64), batch_size=8, progress=False)
    float32 = [r for r in result.rows if r.dtype == "float32"]
    assert [r.budget for r in float32] == [40, 64]
    assert all(r.max_likelihood_change == 0 and r.answers_changed == 0 for r in float32)
    assert result.bounded_mb["bfloat16"] < result.bounded_mb["float32"] < result.full_mb
    assert {r.dtype for r in result.rows} == {"float32", "bfloat16", "float16"}
    lines = result.lines()
    assert "b_max = 64" in lines[0] and len(lines) == 3 + len(result.rows)
