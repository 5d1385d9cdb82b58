"""Per group of a finished search: ``F_best`` after each generation, and where a stopping rule would stop.

    python benchmarks/search_gains.py runs/explore-g20 [--patience 2 3 4 5] [--tolerance 0 0.001 0.003 0.01]

Reads the run's trial store (``study.db``) and replays nothing: ``F_best`` is the best fitness of every
finished trial so far, in search order. For each (patience, tolerance), the generation after which
``search/stopping.py``'s no-gain rule would have stopped each group, and the fitness that stop gives up
against the group's last ``F_best``. How the converging search's defaults were chosen (results/search-budget).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path


def main(argv=None) -> None:
    import optuna

    from evolalloc.search.stopping import StopRule
    from evolalloc.search.store import TrialStore

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--patience", type=int, nargs="+", default=[2, 3, 4, 5])
    parser.add_argument("--tolerance", type=float, nargs="+", default=[0.0, 0.001, 0.003, 0.01])
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = f"sqlite:///{(args.run / 'study.db').resolve()}"
    name = optuna.get_all_study_summaries(url)[0].study_name
    records = TrialStore(optuna.load_study(study_name=name, storage=url), (0.0, 1e9)).records()
    best, by_group = -math.inf, {}
    for r in records:
        by_group.setdefault(r.group, {}).setdefault(r.generation, []).append(r)
    for group in sorted(by_group):
        start, trajectory = best, []
        for generation in sorted(by_group[group]):
            best = max([best] + [r.fitness for r in by_group[group][generation] if r.ok])
            trajectory.append(best)
        print(f"group {group + 1}: F_best {start:.4f} at its start, then " + " ".join(f"{v:.4f}" for v in trajectory))
        history = [start] + trajectory
        for patience in args.patience:
            for tolerance in args.tolerance:
                rule = StopRule(patience=patience, tolerance=tolerance, max_generations=len(trajectory))
                stop = next((n for n in range(1, len(history)) if rule.reason(history[:n + 1], [])), len(trajectory))
                print(f"  patience {patience}, tolerance {tolerance:g}: stops after {stop} generations, "
                      f"gives up {trajectory[-1] - history[stop]:.4f}")


if __name__ == "__main__":
    main()
