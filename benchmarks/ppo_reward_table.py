"""The PPO policy's reward curves, from the training logs ``evolalloc ppo train`` writes beside each checkpoint.

    python benchmarks/ppo_reward_table.py results/decode-time/ppo    # the table ``ppo-reward`` and ppo-reward.png
    python benchmarks/results_tables.py                               # then renders it into the page

Every ``seed<S>.log.jsonl`` in the folder (one JSON line per update: ``reward``, ``entropy``,
``seconds``...) becomes one row: the mean reward over each tenth of the updates, the entropy of the
release distribution at the first and last update, and the training time. The reward is the compressed
model's log-probability of the full cache's next token minus the full cache's own, per step: 0 is the
full cache, and a policy that learns climbs towards it. The table goes into ``data.json`` of the
folder's parent (the study's page), other tables there are kept; the plot beside the logs shows every
update and a running mean of 10.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

LOG = re.compile(r"^seed(?P<seed>\d+)\.log\.jsonl$")
TENTHS = 10
RUNNING = 10


def read_log(path: Path) -> list[dict]:
    """The updates of one training log, in order; a line that is not JSON names the file and line."""
    updates = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                updates.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not a JSON line ({error.msg})")
    if not updates or any("reward" not in u for u in updates):
        raise ValueError(f"{path}: every line needs a 'reward'")
    return updates


def tenths(values: list[float]) -> list[float]:
    """Means over ``TENTHS`` consecutive parts of ``values``, the last taking the remainder (fewer
    values than parts: each value is its own part)."""
    if len(values) < TENTHS:
        return list(values)
    size = len(values) // TENTHS
    parts = [values[i * size:(i + 1) * size] for i in range(TENTHS - 1)] + [values[(TENTHS - 1) * size:]]
    return [sum(p) / len(p) for p in parts]


def reward_table(logs: dict[int, list[dict]], source: str) -> dict:
    rows = []
    for seed, updates in sorted(logs.items()):
        means = tenths([u["reward"] for u in updates])
        rows.append([str(seed), str(len(updates)), *(f"{m:+.3f}" for m in means),
                     *("–" for _ in range(TENTHS - len(means))),
                     f"{updates[0].get('entropy', float('nan')):.2f} → {updates[-1].get('entropy', float('nan')):.2f}",
                     f"{updates[-1].get('seconds', float('nan')) / 60:.1f}"])
    columns = ["seed", "updates", *(f"reward, tenth {i + 1}" for i in range(TENTHS)), "entropy, first → last",
               "training (min)"]
    return {"columns": columns, "rows": rows, "data_kept": True,
            "note": f"Mean per-step reward (log-probability of the full cache's next token, compressed minus full) "
                    f"over each tenth of the updates; from {source}."}


def plot(logs: dict[int, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for seed, updates in sorted(logs.items()):
        rewards = [u["reward"] for u in updates]
        line, = ax.plot(rewards, alpha=0.25, linewidth=0.8)
        running = [sum(rewards[max(0, i - RUNNING + 1):i + 1]) / len(rewards[max(0, i - RUNNING + 1):i + 1])
                   for i in range(len(rewards))]
        ax.plot(running, color=line.get_color(), label=f"seed {seed} (running mean of {RUNNING})")
    ax.axhline(0, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("update")
    ax.set_ylabel("reward per step (0 = full cache)")
    ax.set_title("PPO eviction policy: reward while training")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    folder = Path(argv[0])
    try:
        logs = {int(m["seed"]): read_log(p) for p in sorted(folder.glob("seed*.log.jsonl")) if (m := LOG.match(p.name))}
    except ValueError as error:  # one line naming the file and line, exit 2 (bad input)
        print(error, file=sys.stderr)
        return 2
    if not logs:
        print(f"{folder}: no seed<S>.log.jsonl training logs", file=sys.stderr)
        return 2
    data_path = folder.parent / "data.json"
    data = json.loads(data_path.read_text()) if data_path.exists() else {"tables": {}}
    data.setdefault("tables", {})["ppo-reward"] = reward_table(logs, f"{folder.name}/seed*.log.jsonl")
    data_path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    plot(logs, folder / "ppo-reward.png")
    print(f"{data_path}: table ppo-reward from {len(logs)} seeds; {folder / 'ppo-reward.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
