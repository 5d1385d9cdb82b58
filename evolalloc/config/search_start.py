"""Which profiles a search starts from: the recipe's ``optimizer.start``, resolved once.

``best`` (the default) is every unsearched method the run can compute as a static profile at ``c``
for its own scorer — uniform, PyramidKV and LU-KV (per-head budgets from utility curves profiled on
the search split) — each evaluated on the search split before the first group; the best of them
starts every group's optimizer (``search/groupwise.py``). ``uniform`` is EvolKV as published: no
start is evaluated and every group starts at the uniform ratio. A comma-separated list names the
candidates itself (``pyramid,lukv``), and may hold ``best`` and allocation files: a name ending in
``.json`` is a profile from an earlier run (``allocation-c*.json``, a finer search refining a coarser
one, or yesterday's profile on new data), its budgets carried to ``c`` proportionally
(``pipeline/run_methods.py``); a relative path is read from the folder the command runs in, and the
file is checked before the run's folder exists (``pipeline/start.py``). Its budgets are stored as the
start's trial, so a resumed run no longer needs the file.

A method can start a search only if it is a static allocation ranked by the run's scorer: no scorer
of its own (streaming ranks with StreamingLLM's), no per-input adapter (AdaKV, CAKE, the global
top-k), not the full cache. LU-KV profiles its curves by teacher-forcing each search instance's
reference continuation, so a task that has none (gsm8k: a chain of thought comes first; a
prompts-only task, judged against the full cache's own continuation) cannot start from it, and
``best`` leaves it out there. A search space that reads its budgets through an adapter (the hybrids
over the global top-k) searches a prior, not budgets, so ``best`` resolves to the uniform start there.
"""

from __future__ import annotations

from evolalloc.core.errors import UserError

#: What ``best`` tries, in this order (a tie goes to the earlier one).
BEST = ("uniform", "pyramid", "lukv")
FIELD = "optimizer.start"


def is_profile_file(name: str) -> bool:
    """Whether start ``name`` is an allocation file rather than a method's name."""
    return name.lower().endswith(".json")


def start_problem(name: str) -> str | None:
    """Why method ``name`` cannot start a search, or ``None``."""
    from evolalloc.core.baselines import make_baseline

    try:
        method = make_baseline(name)
    except ValueError as err:
        return str(err)
    if name == "full":
        return "the full cache is not a profile at c"
    if method.scorer is not None or method.adapter is not None:
        return (f"{name!r} ranks with a scorer of its own or adapts its budgets per input; a start must be a "
                f"static profile for the run's scorer ({', '.join(BEST)})")
    return None


def _without_continuation(tasks) -> list[str]:
    """The tasks of ``tasks`` (names) that give no reference continuation (a class attribute: nothing built)."""
    from fitness.registry import task_class

    missing = []
    for name in tasks:
        try:
            cls = task_class(name)
            if not getattr(cls, "reference_continuation", True) or getattr(cls, "judged_against_full_cache", False):
                missing.append(name)
        except LookupError:  # an unregistered name: its recipe was loaded without name checks
            pass
    return missing


def resolve_start(value: str, search_space: str, tasks=()) -> tuple[str, ...]:
    """The methods and allocation files a search on ``tasks`` (their names) evaluates first (empty: EvolKV's
    uniform start); ``UserError`` naming ``optimizer.start`` for a name that cannot start this search."""
    from searchspaces import SEARCH_SPACES

    value = (value or "").strip()
    if value == "uniform":
        return ()
    adapted = SEARCH_SPACES.get(search_space).adapter is not None
    no_continuation = _without_continuation(tasks)
    best = tuple(n for n in BEST if not (n == "lukv" and no_continuation))
    if value == "best":
        return () if adapted else best
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise UserError("must be best, uniform, or methods and allocation files joined by commas", field=FIELD)
    names = tuple(dict.fromkeys(m for n in names for m in (best if n == "best" else (n,))))
    if adapted:
        raise UserError(f"search space {search_space!r} searches a prior read per input, not budgets: "
                        "it starts at uniform (optimizer.start: uniform or best)", field=FIELD)
    for name in names:
        if is_profile_file(name):
            continue  # read, and checked against the model, when the run starts (pipeline/start.py)
        problem = start_problem(name)
        if problem is None and name == "lukv" and no_continuation:
            problem = (f"LU-KV profiles its curves on reference continuations, which task {no_continuation[0]!r} "
                       "does not have")
        if problem:
            raise UserError(problem, field=FIELD)
    return names
