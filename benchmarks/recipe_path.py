"""Which rooms (modules of ``evolalloc/``) does following a recipe from ``evolalloc search`` walk
through, and how often does it come back to one? (Issue 37: each room entered at most twice;
``pipeline/run.py`` entered once per step.)

    python benchmarks/recipe_path.py                # a tiny random-weight model, in-process
    python benchmarks/recipe_path.py --depth 3      # the path cut at another depth
    python benchmarks/recipe_path.py --tree         # and the walk itself, one line per call
    python benchmarks/recipe_path.py --calls        # every call to --depth, not only the recipe's path
    python benchmarks/recipe_path.py --curated      # the search split curated, as the main job's is

It builds a 4-layer random Llama with the bundled tokenizer (as ``tests/conftest.py`` does; with
``--curated``, the bundled SmolLM2-135M instead, which solves passkey), runs
``evolalloc search`` on a tiny passkey recipe in this process under ``sys.setprofile``, and records
every call of a function defined in ``evolalloc/`` made while the ``search`` command runs.

Definitions (the issue leaves them open):

* the *recipe's path* (what the limits are checked on) is the calls that are handed the recipe:
  one of their arguments (``self`` included, ``*args`` and ``**kwargs`` too) is the ``Recipe`` or
  the ``ResolvedRun``, or an object that holds one of them as an attribute, or as an attribute of an
  attribute (the experiment; an object holding the experiment), at any depth below ``search``. Not
  looked into: lists and tuples passed as one argument, and callables (a bound method's or a lambda's
  ``__dict__`` is empty): a piece handed a callback (``TaskSplits``'s ``curate``, curation's
  ``evaluator``, the engine's workload providers) is not handed the recipe, though the callback
  reaches it; ``--callables`` looks into them (below). The recipe's own methods and properties (``self`` the
  ``Recipe`` or ``ResolvedRun``) read it where it is and do not count. A call handed only a piece (a
  section, a budget, an allocation, a result) is the piece's business, not the recipe's: a helper
  that parses a method's name or writes a file, called from every step, is not the recipe going
  back and forth.
* ``--callables`` also counts a callable as holding what it reaches: a bound method its ``self``, a
  function or lambda the values its closure captured. A piece handed a callback into the experiment
  is then on the path, and each call back into the experiment through it enters the experiment again:
  the stricter figure for "the recipe goes back and forth", printed for comparison.
* ``--calls`` walks every evolalloc call instead, down to ``--depth`` levels below ``search``
  (deeper calls are the rooms' own business: the runtime's per-layer and per-token loops). It is
  the wider, stricter figure, printed for comparison.
* either walk is its calls in the order they are made (a pre-order of the call tree). Frames of
  other packages (torch, click, optuna) and comprehensions do not count as levels. A generator
  resumed is not a new call. Imports are not calls: a module's top level and class bodies run
  when it is imported, and what they call is left out.
* the walk *enters* a room when a function of that module is called from another module (a call
  within a module stays in the room, however deep); on the recipe's path, "called from" is the
  nearest caller on the path (a call through a helper that is not handed the recipe does not
  leave the room). A *stay* is a maximal run of consecutive
  entries into one room; a room's stays are how many times the walk enters it, and "at most twice"
  is at most 2 stays. A room that hands control back and forth (``A -> B``, back, ``A -> B`` again
  from another call) is entered each time.
* the *steps* are the five of ``pipeline/run.py``'s docstring, by the function that makes each:
  search (``resume_search``/``run_search``), ship (``ship``), compare, report, tidy
  (``remove_records``), each with the calls below it. Each step is dispatched from ``run.py``
  (that is its one entry); every call inside it that comes back into ``run.py`` from another
  module is one more. Once per step is 1.

Prints the stays per module, ``run.py``'s entries per step and the rooms over the limits; with
``--tree``, the walk first. Nothing here is timed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path

STEP_FUNCTIONS = {"resume_search": "search", "run_search": "search", "ship": "ship", "compare": "compare",
                  "report": "report", "remove_records": "tidy"}
RUN_MODULE = "evolalloc.pipeline.run"
ROOT_MODULE, ROOT_FUNCTION = "evolalloc.cli.search_cmds", "search"
MOST_STAYS = 2
GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
OPTIMIZED = 0x1  # CO_OPTIMIZED: a function's code, not a module's top level or a class body


@dataclass(frozen=True)
class Call:
    """One call of the walk: how many evolalloc functions below the root it is, where, and the
    module of the evolalloc function that made it (``None`` for the root)."""

    depth: int
    module: str
    function: str
    caller: str | None

    @property
    def enters(self) -> bool:
        """Whether this call enters its room (from another module)."""
        return self.caller != self.module


def stays(walk: list[Call], depth: int) -> list[tuple[str, list[Call]]]:
    """The entries of the walk cut at ``depth``, as ``(module, its consecutive entries)`` stays."""
    out: list[tuple[str, list[Call]]] = []
    for call in walk:
        if call.depth > depth or not call.enters:
            continue
        if out and out[-1][0] == call.module:
            out[-1][1].append(call)
        else:
            out.append((call.module, [call]))
    return out


def stays_per_module(walk: list[Call], depth: int) -> dict[str, int]:
    """How many times the walk (cut at ``depth``) enters each module, most first."""
    counts: dict[str, int] = {}
    for module, _ in stays(walk, depth):
        counts[module] = counts.get(module, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def step_entries(walk: list[Call], depth: int, module: str = RUN_MODULE) -> list[tuple[str, int]]:
    """``(step, entries of module)`` for every step call of the walk, in order: 1 for the step's
    dispatch from ``module``, plus the stays in ``module`` among the calls inside the step (those
    after it until the walk comes back to its depth). A step call is one whose function names a
    step (``STEP_FUNCTIONS``) and whose caller is ``module``."""
    out = []
    for i, call in enumerate(walk):
        step = STEP_FUNCTIONS.get(call.function)
        if step is None or call.caller != module or call.depth > depth:
            continue
        inside = []
        for later in walk[i + 1:]:
            if later.depth <= call.depth:
                break
            inside.append(later)
        out.append((step, 1 + sum(1 for name, _ in stays(inside, depth) if name == module)))
    return out


#: ``--callables``: a callable holds what its ``self`` or its closure holds (set by ``main``).
FOLLOW_CALLABLES = False


def held_by_callable(value) -> list:
    """What a callable reaches: a bound method's ``self``, a function's captured closure values."""
    if isinstance(value, types.MethodType):
        return [value.__self__, *held_by_callable(value.__func__)]
    if not isinstance(value, types.FunctionType):
        return []
    held = []
    for cell in value.__closure__ or ():
        try:
            held.append(cell.cell_contents)
        except ValueError:  # a cell not filled yet
            pass
    return held


def carries_recipe(value, levels: int = 2) -> bool:
    """Whether ``value`` is the recipe or what it resolved to, or holds one of them as an attribute
    (``levels`` deep: the experiment holds the recipe; an object holding the experiment, two levels);
    with ``FOLLOW_CALLABLES``, a callable holds what it reaches (``held_by_callable``)."""
    from evolalloc.config.recipe_type import Recipe
    from evolalloc.config.resolved import ResolvedRun

    if isinstance(value, (Recipe, ResolvedRun)):
        return True
    if levels == 0 or isinstance(value, type):
        return False
    if FOLLOW_CALLABLES and any(carries_recipe(v, levels - 1) for v in held_by_callable(value)):
        return True
    attributes = getattr(value, "__dict__", None)
    return isinstance(attributes, dict) and any(carries_recipe(v, levels - 1) for v in list(attributes.values()))


def handed_recipe(frame) -> bool:
    """Whether one of the arguments of the call ``frame`` begins is the recipe or holds it. The recipe's
    own methods and properties (``self`` the ``Recipe`` or ``ResolvedRun``: ``resolved.fitness_mode``)
    are the recipe read where it is, not handed to their module: they count only when handed another
    argument that is or holds the recipe."""
    from evolalloc.config.recipe_type import Recipe
    from evolalloc.config.resolved import ResolvedRun

    code = frame.f_code
    named = code.co_argcount + code.co_kwonlyargcount
    count = named + bool(code.co_flags & 0x4) + bool(code.co_flags & 0x8)  # *args, **kwargs
    values = []
    for i, name in enumerate(code.co_varnames[:count]):
        value = frame.f_locals.get(name)
        if i == 0 and name == "self" and isinstance(value, (Recipe, ResolvedRun)):
            continue
        if i >= named:  # *args (a tuple) or **kwargs (a dict): their values
            values.extend(value.values() if isinstance(value, dict) else value or ())
        else:
            values.append(value)
    return any(carries_recipe(v) for v in values)


class Recorder:
    """A ``sys.setprofile`` hook: the calls of evolalloc functions made inside the root call, either
    every one down to ``max_depth`` (``follow=False``) or those handed the recipe (``follow=True``)."""

    def __init__(self, package_dir: Path, max_depth: int, follow: bool = True):
        self.prefix = str(package_dir) + os.sep
        self.max_depth = max_depth
        self.follow = follow
        self.modules: dict[object, str | None] = {}  # code object -> module name, or None: not ours
        # evolalloc frames open below (and including) the root:
        # (frame, module, counts as a level, import, module of the nearest caller on the recipe's path)
        self.stack: list[tuple[object, str, bool, bool, str | None]] = []
        self.importing = 0  # how many of them are a module's top level or a class body
        self.resumable: dict[int, object] = {}  # generator frames already called (kept alive: ids stay unique)
        self.walk: list[Call] = []

    def module_of(self, code) -> str | None:
        if code not in self.modules:
            name = code.co_filename
            self.modules[code] = (name[len(self.prefix) - len("evolalloc") - 1:-3].replace(os.sep, ".")
                                  .removesuffix(".__init__") if name.startswith(self.prefix) else None)
        return self.modules[code]

    def __call__(self, frame, event, arg):
        if event == "call":
            code = frame.f_code
            module = self.module_of(code)
            if module is None:
                return
            if not self.stack and (module, code.co_name) != (ROOT_MODULE, ROOT_FUNCTION):
                return
            imported = not code.co_flags & OPTIMIZED  # a module's top level or a class body
            level = not code.co_name.startswith("<")  # not a comprehension, generator expression or lambda
            resumed = code.co_flags & GENERATOR_FLAGS and id(frame) in self.resumable
            if code.co_flags & GENERATOR_FLAGS:
                self.resumable[id(frame)] = frame
            depth = sum(1 for entry in self.stack if entry[2])
            on_path = self.stack[-1][4] if self.stack else None  # the module of the nearest caller on the path
            counted = not resumed and not imported and not self.importing
            if self.follow:
                if counted and level and (not self.stack or handed_recipe(frame)):
                    self.walk.append(Call(depth, module, code.co_name, on_path))
                    on_path = module
            elif counted and depth <= self.max_depth:
                caller = self.stack[-1][1] if self.stack else None
                self.walk.append(Call(depth, module, code.co_name, caller))
            self.stack.append((frame, module, level, imported, on_path))
            self.importing += imported
        elif event == "return" and self.stack and self.stack[-1][0] is frame:
            self.importing -= self.stack.pop()[3]


def tiny_run(folder: Path, curated: bool = False) -> Path:
    """A tiny random Llama (``tests/conftest.py::tiny_model_dir``) and a passkey recipe over it;
    ``curated``: its search split curated as the main job's is (drawn, judged with the full cache),
    on the bundled SmolLM2-135M, which solves passkey (the random model solves nothing, so curation
    would keep nothing)."""
    import torch
    import yaml
    from transformers import LlamaConfig, LlamaForCausalLM

    from evolalloc.runtime.model import load_tokenizer

    if not curated:
        tokenizer = load_tokenizer()
        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                             eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id)
        LlamaForCausalLM(config).save_pretrained(folder / "model")
        tokenizer.save_pretrained(folder / "model")
    recipe = {
        "name": "path", "model": {"spec": "bundled:smollm2-135m-instruct" if curated else str(folder / "model")},
        "task": {"name": "passkey", "context_tokens": 160, "heldout": {"n": 2},
                 "search": {"n": 2, "curate": {"full_cache_solves": True, "draw": 4}} if curated else {"n": 2}},
        "scorer": {"name": "snapkv", "params": {"window": 8}},
        "budget": {"target": 64, "expansions": [96]},
        "search_space": {"name": "layer_groups", "group_size": 2},
        "optimizer": {"name": "cma", "generations_per_group": 1, "popsize": 3, "budget_rule": "exact"},
        "engine": {"kind": "local", "threads": 1, "batch_size": 8},
        "baselines": ["uniform", "pyramid"], "seed": 0,
    }
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    return folder / "recipe.yaml"


def record_search(recipe: Path, runs_dir: Path, max_depth: int, follow: bool = True) -> list[Call]:
    """The walk of ``evolalloc search RECIPE`` run in this process: the recipe's path (``follow``), or
    every call down to ``max_depth``."""
    import evolalloc
    from evolalloc.cli import main

    recorder = Recorder(Path(evolalloc.__file__).parent, max_depth, follow)
    sys.setprofile(recorder)
    try:
        main.main(["search", str(recipe), "--runs-dir", str(runs_dir), "--no-progress"], standalone_mode=False)
    finally:
        sys.setprofile(None)
    return recorder.walk


def short(module: str) -> str:
    return module.removeprefix("evolalloc.").replace(".", "/") + ".py"


def tree_lines(walk: list[Call], depth: int) -> list[str]:
    """The walk cut at ``depth``, one line per call indented by its depth (``>`` marks a call that
    enters its room); repeats of the same line in a row are counted, not repeated."""
    lines: list[list] = []
    for call in walk:
        if call.depth > depth:
            continue
        text = f"{'  ' * call.depth}{'>' if call.enters else ' '} {short(call.module)}: {call.function}"
        if lines and lines[-1][0] == text:
            lines[-1][1] += 1
        else:
            lines.append([text, 1])
    return [text + (f"  (x{n})" if n > 1 else "") for text, n in lines]


def print_path(walk: list[Call], depth: int, what: str) -> int:
    """Prints the counts and the violators; returns how many violators."""
    per_module = stays_per_module(walk, depth)
    calls = [c for c in walk if c.depth <= depth]
    print(f"walk: {len(calls)} evolalloc calls {what}, "
          f"{sum(c.enters for c in calls)} of them entering a room, in {sum(per_module.values())} stays "
          f"in {len(per_module)} modules")
    print("\nstays per module (times the walk enters it):")
    for module, count in per_module.items():
        print(f"  {count:4d}  {short(module)}")
    steps = step_entries(walk, depth)
    print(f"\n{short(RUN_MODULE)} entries per step (its dispatch + calls back into it):")
    for step, count in steps:
        print(f"  {step:8s} {count}")
    over = {m: c for m, c in per_module.items() if c > MOST_STAYS}
    over_steps = [(s, c) for s, c in steps if c > 1]
    print(f"\nviolators: {len(over)} modules entered more than {MOST_STAYS} times"
          + (": " + ", ".join(f"{short(m)} ({c})" for m, c in over.items()) if over else ""))
    print(f"           {len(over_steps)} steps entering {short(RUN_MODULE)} more than once"
          + (": " + ", ".join(f"{s} ({c})" for s, c in over_steps) if over_steps else ""))
    return len(over) + len(over_steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", action="store_true",
                        help="walk every evolalloc call down to --depth, not only those handed the recipe")
    parser.add_argument("--depth", type=int, default=5,
                        help="with --calls: levels of evolalloc calls below `search` that make the walk (default 5: "
                             "search, start_run, run_prepared, ship_and_compare, a step, what the step calls)")
    parser.add_argument("--tree", action="store_true", help="print the walk first, one line per call")
    parser.add_argument("--callables", action="store_true",
                        help="count a callable (a callback, a bound method) as holding what its self or closure holds")
    parser.add_argument("--curated", action="store_true",
                        help="the search split curated, as the main job's (runs/quickstart.yaml) is")
    args = parser.parse_args()
    global FOLLOW_CALLABLES
    FOLLOW_CALLABLES = args.callables
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    depth = args.depth if args.calls else sys.maxsize
    with tempfile.TemporaryDirectory(prefix="recipe-path-") as tmp:
        recipe = tiny_run(Path(tmp), curated=args.curated)
        walk = record_search(recipe, Path(tmp) / "runs", depth, follow=not args.calls)
    print()
    if args.tree:
        print("\n".join(tree_lines(walk, depth)) + "\n")
    print_path(walk, depth, f"at depth <= {depth} below `search`" if args.calls
               else "handed the recipe (or what holds it) below `search`, at any depth")


if __name__ == "__main__":
    main()
