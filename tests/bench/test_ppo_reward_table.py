"""benchmarks/ppo_reward_table.py: the PPO training logs become the page's reward-curve table and plot."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.benchscripts import load_benchmark


def script():
    return load_benchmark("ppo_reward_table")


def write_log(path: Path, rewards: list[float]) -> None:
    path.write_text("".join(json.dumps({"update": i, "reward": r, "entropy": 5.0 - i / 100, "seconds": 6.0 * (i + 1)})
                            + "\n" for i, r in enumerate(rewards)))


def test_each_seed_is_a_row_of_means_per_tenth_beside_the_pages_other_tables(tmp_path):
    ppo = tmp_path / "ppo"
    ppo.mkdir()
    write_log(ppo / "seed0.log.jsonl", [-1.0] * 10 + [0.0] * 10)            # climbs in its sixth tenth
    write_log(ppo / "seed2.log.jsonl", [-0.5] * 21)                         # the last tenth takes the remainder
    (tmp_path / "data.json").write_text(json.dumps({"tables": {"kept": {"columns": ["a"], "rows": [["1"]]}}}))
    assert script().main([str(ppo)]) == 0
    tables = json.loads((tmp_path / "data.json").read_text())["tables"]
    assert set(tables) == {"kept", "ppo-reward"}
    seed0, seed2 = tables["ppo-reward"]["rows"]
    assert seed0[:2] == ["0", "20"] and seed0[2:12] == ["-1.000"] * 5 + ["+0.000"] * 5
    assert seed0[12] == "5.00 → 4.81" and seed0[13] == "2.0"
    assert seed2[:2] == ["2", "21"] and seed2[2:12] == ["-0.500"] * 10
    assert (ppo / "ppo-reward.png").stat().st_size > 0


def test_a_line_that_is_not_json_names_the_file_and_line(tmp_path, capsys):
    (tmp_path / "seed1.log.jsonl").write_text('{"update": 0, "reward": -0.1}\nnot json\n')
    assert script().main([str(tmp_path)]) == 2
    assert re.search(r"seed1\.log\.jsonl:2: not a JSON line", capsys.readouterr().err)
    assert not (tmp_path.parent / "data.json").exists()


def test_a_folder_without_logs_is_refused(tmp_path, capsys):
    assert script().main([str(tmp_path)]) == 2
    assert "no seed<S>.log.jsonl" in capsys.readouterr().err
