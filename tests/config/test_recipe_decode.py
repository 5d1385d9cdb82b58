"""``budget.decode``: the recipe key that holds the budgets while decoding — resolved once, refused in one
line (exit 2) for an interval below 1, a scorer that cannot rank generated tokens, or a fitness mode that
cannot use it."""

from __future__ import annotations

import pytest

from evolalloc.config.recipe import load_recipe
from evolalloc.config.resolved import ResolvedRun, resolve_run
from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.core.errors import UserError
from tests.pipeline.test_pipeline import evolalloc, tiny_recipe

GOOD = """\
name: demo
task:
  name: passkey
  context_tokens: 1000
budget:
  target: 128
  decode: {interval: 16}
"""


def test_the_resolved_run_carries_the_decode_setting_and_an_old_run_json_is_prompt_only(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(GOOD)
    resolved = resolve_run(load_recipe(path))
    assert resolved.decode == DecodeEviction(16) and resolved.decode_interval == 16
    old = resolved.to_dict()
    del old["decode_interval"]  # a run.json written before budget.decode existed
    assert ResolvedRun.from_dict(old).decode is None
    path.write_text(GOOD.replace("  decode: {interval: 16}\n", ""))
    assert resolve_run(load_recipe(path)).decode is None


@pytest.mark.parametrize("text, field, phrase", [
    (GOOD.replace("interval: 16", "interval: 0"), "budget.decode.interval", "must be >= 1"),
    (GOOD.replace("{interval: 16}", "{}"), "budget.decode.interval", "missing required field"),
    (GOOD.replace("{interval: 16}", "16"), "budget.decode", "must be a mapping"),
    (GOOD + "scorer: {name: random}\n", "scorer.name", "scorer 'random' cannot rank generated tokens"),
])
def test_a_decode_setting_that_cannot_run_is_one_error_naming_the_field(tmp_path, text, field, phrase):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as info:
        load_recipe(path)
    assert info.value.field == field and phrase in str(info.value) and "\n" not in str(info.value)


def test_a_fitness_mode_that_cannot_hold_budgets_while_decoding_is_refused(tmp_path, monkeypatch):
    import evolalloc.core.decode_eviction as setting

    monkeypatch.setattr(setting, "DECODE_FITNESS_MODES", ("generate", "graded"))  # as a new mode would be
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD + "fitness: {mode: likelihood}\n")
    with pytest.raises(UserError, match="fitness.mode: task 'passkey': fitness mode 'likelihood' cannot hold"):
        load_recipe(path)


@pytest.mark.parametrize("decode, scorer, phrase", [
    ({"interval": 0}, {"name": "snapkv"}, "budget.decode.interval: must be >= 1"),
    ({"interval": 4}, {"name": "random"}, "scorer 'random' cannot rank generated tokens"),
])
def test_search_exits_2_with_one_line_and_writes_nothing(tmp_path, tiny_model_dir, decode, scorer, phrase):
    recipe = tiny_recipe(tmp_path, tiny_model_dir, budget={"target": 24, "expansions": [48], "decode": decode},
                         scorer=scorer)
    done = evolalloc("search", str(recipe), "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and phrase in done.stderr
    assert not (tmp_path / "runs").exists()
