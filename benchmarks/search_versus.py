"""Several searches x seeds of one recipe on ONE set of prefill records: the optimizer comparison.

Comparing optimizers (CMA-ES variants, random, TPE) over 3 seeds each means 9+ runs of one
recipe that differ only in ``search_space`` / ``optimizer``. Run one by one, each would prefill
the same search and held-out instances again (~5 s a prompt on a busy CPU, most of a run's
time). Here one ``Experiment`` prefills them once, every search runs on its records, then every
profile is compared on the held-out split; each (variant, seed) still gets a normal run folder
(``recipe.yaml``, ``study.db``, ``allocation-c*.json``, ``comparison.json``, ``report.md``), so
``benchmarks/versus.py`` pairs them and ``evolalloc show`` reads them::

    python benchmarks/search_versus.py runs/quickstart.yaml --runs-dir /tmp/runs --prefix qs \\
        --set task.search.n=24 --seeds 0 1 2 \\
        --variant knots "search_space.name=depth_knots optimizer.generations_per_group=4" \\
        --variant random "optimizer.name=random optimizer.generations_per_group=1"

A variant is a name and space-separated ``--set`` overrides on top of the shared ones; its runs
are ``<prefix>-<name>-s<seed>``. Only ``search_space``, ``optimizer``, ``budget`` and ``name`` may
differ between variants (anything else would change the instances or the scoring: refused). A
variant's budgets may not exceed the shared recipe's largest: the shared prefill is bounded by the
shared recipe's budgets, so put the largest target in ``--set`` (refused otherwise). A finished
run folder is re-used and an unfinished one resumed (its stored trials replayed), so the command
can be run again after a kill, or after ``--held-in`` to compare the same searches on held-out.
``--search-only`` stops after the searches, so that two processes (one variant each, the same
``--runs-dir``) can search side by side on two cores; the full command then replays every stored
search in seconds and compares once. ``--prefill-from-end``, run beside that comparing call once every
search is done, prefills the held-out split from its last prompt backwards into the same records
folder until it meets the comparing call's records, which then reads the rest back: the held-out
prefill (most of a long-context setting) on two cores.
Each run's search evaluations and its own wall time (its search plus its held-out comparison, the
shared prefill not included) are printed at the end.

``--held-in SEED N`` is for *choosing* a variant without touching the held-out split: after the
searches, each shipped profile is scored (greedy answers, the task's metric) on ``N`` other
instances of the *search* split, drawn with instance seed ``SEED`` (uncurated), and no held-out
comparison is run; the runs stay unfinished and the scores go to ``<runs-dir>/<prefix>-held-in.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from evolalloc.core.errors import UserError

SHARED_FREE = ("search_space", "optimizer", "budget", "name")


def variant_recipes(recipe_path: Path, shared: list[str], variants: list[tuple[str, str]], seeds: list[int],
                    prefix: str):
    """``[(variant, seed, recipe)]``: each variant's overrides on the shared ones, one recipe per seed."""
    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.resolved import resolve_run

    shared_recipe = load_recipe(recipe_path, shared)
    base, largest = shared_recipe.to_dict(), max(resolve_run(shared_recipe).budgets)
    out = []
    for vname, sets in variants:
        loaded = load_recipe(recipe_path, shared + sets.split())
        different = [key for key, value in loaded.to_dict().items() if key not in SHARED_FREE and value != base[key]]
        if different:
            raise UserError(f"a variant may change only {', '.join(SHARED_FREE)}; "
                            f"{vname!r} changes {', '.join(different)}",
                            field="--variant")
        reaches = max(resolve_run(loaded).budgets)
        if reaches > largest:  # the shared prefill would be bounded below its budgets
            raise UserError(f"variant {vname!r} reaches budget {reaches}, above the shared "
                            f"recipe's largest ({largest}): set the largest target with --set",
                            field="--variant")
        for seed in seeds:
            seeded = dataclasses.replace(loaded, name=f"{prefix}-{vname}-s{seed}",
                                         optimizer=dataclasses.replace(loaded.optimizer, seed=seed))
            seeded.source = loaded.source
            out.append((vname, seed, seeded))
    return shared_recipe, out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", type=Path)
    parser.add_argument("--runs-dir", type=Path, required=True)
    parser.add_argument("--prefix", required=True, help="run folders are <prefix>-<variant>-s<seed>")
    parser.add_argument("--set", dest="shared", action="append", default=[], help="override for every variant")
    parser.add_argument("--variant", nargs=2, action="append", required=True, metavar=("NAME", "SETS"))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--held-in", nargs=2, type=int, default=None, metavar=("SEED", "N"),
                        help="score each profile on N search-split instances of instance seed SEED; no held-out")
    parser.add_argument("--search-only", action="store_true",
                        help="stop after the searches (runs stay unfinished): split a study's variants over two "
                             "processes, then one call without it replays them all and compares")
    parser.add_argument("--prefill-from-end", action="store_true",
                        help="after the searches: prefill the held-out split from its last prompt backwards into "
                             "the runs' records, stopping where they already are; beside the comparing call, which "
                             "prefills from the first, the two cores share the held-out prefill")
    parser.add_argument("--compare-once", type=Path, default=None, metavar="OUT.json",
                        help="score every run's profiles and the shared recipe's baselines once on the held-out "
                             "split, every per-instance score in OUT.json (benchmarks/compare_once.py), instead of "
                             "a comparison per run")
    parser.add_argument("--compare-modes", default="generate",
                        help="with --compare-once: the held-out modes scored, comma-separated (the first is the "
                             "table's), e.g. generate,fidelity; agreement,fidelity for a task with answers whose "
                             "greedy answers are judged against the full cache's continuation")
    parser.add_argument("--compare-budgets", type=float, nargs="+", default=None, metavar="C",
                        help="with --compare-once: compare at these of the run's budgets only (default: all)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    try:
        return run(args)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def run(args) -> int:
    from evolalloc.config.run_folder import CURATION_FILE, create_run_folder, load_run_recipe
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.pipeline.run import (
        HELDOUT,
        _OnFirstUse,
        evolved_allocation,
        quiet_optuna,
        report_and_tidy,
        run_finished,
        ship,
        ship_and_compare,
    )
    from evolalloc.pipeline.wall_clock import begin_session
    from evolalloc.search import resume_search, run_search
    from fitness.task import FITNESS_MODES

    progress = not args.no_progress
    base, runs = variant_recipes(args.recipe, args.shared, args.variant, args.seeds, args.prefix)
    if args.compare_budgets is not None:
        from evolalloc.config.resolved import resolve_run

        every = sorted(float(b) for b in resolve_run(base).budgets)
        if not args.compare_once or not set(args.compare_budgets) <= set(every):
            raise UserError(f"takes --compare-once and budgets of the run ({', '.join(f'{b:g}' for b in every)})",
                            field="--compare-budgets")
    modes = [m.strip() for m in args.compare_modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in FITNESS_MODES]
    if unknown or not modes:  # before the searches, not after them
        raise UserError(f"{', '.join(unknown) or 'none'}: not a mode; valid: {', '.join(FITNESS_MODES)}",
                        field="--compare-modes")
    todo = []
    for vname, seed, recipe in runs:
        folder = args.runs_dir / recipe.name
        if folder.exists() and load_run_recipe(folder).to_dict() != recipe.to_dict():
            raise UserError("this folder holds a run of another recipe: remove it or pick another --prefix",
                            source=str(folder))
        if not folder.exists() or not run_finished(folder):
            todo.append((vname, seed, recipe))
    quiet_optuna()
    timings: dict[str, tuple[int, float]] = {}
    # Run again after a kill: the last run folder made is where the shared records spilled and the
    # curations were written (record_curations below); reading them there re-uses both instead of
    # curating and prefilling every split again.
    made = [args.runs_dir / recipe.name for _, _, recipe in runs if (args.runs_dir / recipe.name).exists()]
    curation = made[-1] / CURATION_FILE if made else None
    if args.prefill_from_end:
        unsearched = [recipe.name for _, _, recipe in runs if not (args.runs_dir / recipe.name).exists()]
        if unsearched or base.multi_task:
            raise UserError("--prefill-from-end runs beside the comparing call, once every search has a run folder "
                            f"(missing: {', '.join(unsearched) or 'none'}) and for one task",
                            field="--prefill-from-end")
        return prefill_from_end(base, curation)
    with Experiment(base, progress=progress, curation_file=curation) as experiment:
        searched = []
        if any(not (args.runs_dir / recipe.name).exists() for _, _, recipe in todo) and not base.multi_task:
            experiment.records("search")  # the shared prefill, outside every run's search time
        for vname, seed, recipe in todo:  # every search first: ship_and_compare() releases the search records
            config = experiment.variant(recipe).search_config
            started = time.perf_counter()
            run_dir = args.runs_dir / recipe.name
            if run_dir.exists():  # killed, or searched for --held-in only: replay the stored trials, evaluate the rest
                experiment.run.run_dir = experiment.run.run_dir or run_dir  # LU-KV's curves: the first run's folder
                result = resume_search(run_dir, _OnFirstUse(experiment.search_evaluator), config=config,
                                       progress=progress, starts=experiment.run.methods.starts(config))
            else:
                run_dir = create_run_folder(recipe, args.runs_dir)
                experiment.record_curations(run_dir / CURATION_FILE)
                experiment.run.run_dir = experiment.run.run_dir or run_dir  # LU-KV's curves: the first run's folder
                result = run_search(run_dir, experiment.search_evaluator(), config, progress=progress,
                                    starts=experiment.run.methods.starts(config))
            searched.append((run_dir, recipe, result, config, time.perf_counter() - started))
            print(f"{run_dir.name}: {len(result.history)} evaluations "
                  f"({result.evaluated} new), search {searched[-1][-1]:.0f} s, "
                  f"best search fitness {result.best_fitness}", flush=True)
        if args.held_in:
            return held_in(args, searched, experiment)
        if args.search_only:
            return 0
        # Every run ships before any ship_and_compare(): it releases the search records, and rule `search`
        # scores each run's expansions on them (else each later run would prefill the split again).
        shipped = []
        for run_dir, recipe, result, config, seconds in searched:
            started = time.perf_counter()
            variant = experiment.variant(recipe)
            profiles = ship(run_dir, variant, evolved_allocation(variant, result, config), config, progress)
            shipped.append((run_dir, recipe, result, config, seconds + time.perf_counter() - started, profiles))
        if searched and not base.multi_task:
            experiment.records(HELDOUT)  # the shared held-out prefill, outside every run's own time
        if args.compare_once:
            from compare_once import compare_once  # the file beside this one (benchmarks/ is sys.path[0])

            compare_once(experiment, experiment.resolved, shipped, args.compare_once,
                         seconds={run_dir.name: secs for run_dir, _, _, _, secs, _ in shipped},
                         modes=tuple(modes),
                         budgets=tuple(args.compare_budgets) if args.compare_budgets else None)
            if not experiment.resolved.keep_records:  # as a finished run tidies: the JSON holds every score now
                from evolalloc.config.run_folder import remove_records

                freed = sum(remove_records(run_dir) for run_dir, *_ in shipped)
                print(f"removed the spilled prefill records ({freed / 2**30:.1f} GiB; engine.keep_records keeps them)")
            return 0
        for run_dir, recipe, result, config, seconds, profiles in shipped:
            started = time.perf_counter()
            # The report's wall time: this run's search and shipping plus its own comparison, not the shared prefill.
            begin_session(run_dir, time.time() - seconds, by_phase=False)  # that window held other runs' work
            report_and_tidy(ship_and_compare(run_dir, experiment.variant(recipe), result, config, profiles=profiles,
                                             progress=progress))
            timings[run_dir.name] = (len(result.history), seconds + time.perf_counter() - started)
    for name, (evaluations, seconds) in timings.items():
        print(f"{name}: {evaluations} evaluations, {seconds:.0f} s (search + held-out comparison, busy machine)")
    return 0


def prefill_from_end(base, curation: Path) -> int:
    """The shared held-out split's records, made as the comparing call makes them (same bound, scorers and
    folder: the last run folder's ``records/``) but from the last prompt backwards, each spilled at once.
    Records already on disk at the end are skipped (an earlier, killed run of this call made them); after
    the first one it makes, it stops at the next record on disk: the comparing call, prefilling from the
    first prompt, has come that far, and from there on it reads back what this call wrote
    (``RecordKeeper.reuse``)."""
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.pipeline.run import HELDOUT
    from evolalloc.runtime.instances import prefill_instances, tokenize_instance

    with Experiment(base, progress=False, curation_file=curation) as experiment:
        (_, _, part), = experiment.parts
        run, after = experiment.run, part.splits.task_section.question_after_compression
        keeper, bound = run.records.keeper, run.records.policy_for(HELDOUT).bound
        if keeper.policy.spill_dir is None or keeper.policy.memory is None:
            raise UserError("these records are never spilled (engine.record_memory), so no other call could read "
                            "them", field="--prefill-from-end")
        run.scorers.ensure_trained()
        keys = [scorer.key for scorer in run.scorers.all]
        made = kept = 0
        for instance in reversed(experiment.instances(HELDOUT)):
            ids, question = tokenize_instance(run.model.tokenizer, instance, after)
            if keeper.path_for(keeper.key(ids, question, keys, bound)).exists():
                if made:
                    break
                kept += 1
                continue
            prefill_instances(run.model.loaded, [instance], run.scorers.all, question_after_compression=after,
                              keeper=keeper, bound=bound, hold=False)
            made += 1
    print(f"prefilled {made} held-out prompts from the end"
          + (f" (skipped the last {kept}, on disk already)" if kept else ""), flush=True)
    return 0


def held_in(args, searched, experiment) -> int:
    """Score every searched profile on other search-split instances (see the module docstring)."""
    import json

    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.pipeline.run import evolved_allocation

    seed, n = args.held_in
    other = load_recipe(args.recipe, args.shared + [f"task.search.seed={seed}", f"task.search.n={n}",
                                                     "task.search.curate.full_cache_solves=false",
                                                     "task.search.curate.draw=null"])
    profiles = {run_dir.name: evolved_allocation(experiment.variant(recipe), result, config).budgets
                for run_dir, recipe, result, config, _ in searched}
    experiment.release("search")
    with Experiment(other, progress=not args.no_progress) as checking:
        checking.run.model.loaded = experiment.loaded  # one model in memory (a cached_property)
        results = checking.evaluator("search", mode="generate").evaluate(list(profiles.values()))
    scores = {}
    for name, result in zip(profiles, results):
        if not result.ok:
            raise RuntimeError(f"held-in evaluation of {name} failed: {result.error}")
        scores[name] = {o.uid: o.score for o in result.instances}
        print(f"{name}: held-in mean {sum(scores[name].values()) / len(scores[name]):.3f} on {len(scores[name])} "
              f"search-split instances (seed {seed})")
    out = args.runs_dir / f"{args.prefix}-held-in.json"
    out.write_text(json.dumps({"seed": seed, "n": n, "scores": scores}, indent=1) + "\n")
    print(f"held-in scores: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
