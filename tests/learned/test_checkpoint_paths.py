"""One default checkpoint per trained scorer, under the cache directory that EVOLALLOC_CACHE moves."""

from __future__ import annotations

from evolalloc.core.baselines import make_baseline
from evolalloc.core.paths import cache_dir, default_checkpoint
from evolalloc.runtime.scorers import get_scorer


def test_evolalloc_cache_moves_every_default_checkpoint_and_the_model_cache(tmp_path, monkeypatch):
    from evolalloc.runtime import model

    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "elsewhere"))
    assert cache_dir() == model.cache_dir() == tmp_path / "elsewhere"
    # The retention-gates scorer (or its old name, gates) reads the checkpoint of kind gates.
    for name in ("retention-gates", "gates"):
        assert get_scorer(name).checkpoint == str(tmp_path / "elsewhere" / "gates" / "gates.pt")
    assert get_scorer("learned").checkpoint == str(tmp_path / "elsewhere" / "learned" / "policy.pt")
    assert make_baseline("global-topk").scorer == ("retention-gates", {"checkpoint": str(default_checkpoint("gates"))})
    assert str(tmp_path / "elsewhere") in make_baseline("global-topk").problem()  # no file there yet: says where


def test_a_named_checkpoint_is_kept_with_home_expanded(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert get_scorer("gates", checkpoint="~/g.pt").checkpoint == str(tmp_path / "g.pt")
