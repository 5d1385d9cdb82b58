"""Run `evolalloc search RECIPE ...` in this process with each phase of the run timed (wall seconds):
prefills (runtime/instances.prefill_instances), the search (search/loop.resume_search), LU-KV's curves,
the held-out comparison (pipeline/run.compare), the report. Prints one line per phase at the end.
Usage: python timed_run.py RECIPE [search options...]"""
import sys, time, functools, json
from evolalloc.cli import main
import evolalloc.pipeline.run as run_module
import evolalloc.pipeline.task_splits as splits_module
import evolalloc.search.loop as loop_module
import evolalloc.pipeline.lukv as lukv_module

spent = {}

def timed(owner, name, label):
    real = getattr(owner, name)
    @functools.wraps(real)
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - started
    setattr(owner, name, wrapper)

calls = []
real_prefill = splits_module.prefill_instances
def prefill_instances(loaded, instances, *args, **kwargs):
    started = time.perf_counter()
    try:
        return real_prefill(loaded, instances, *args, **kwargs)
    finally:
        calls.append((len(instances), round(time.perf_counter() - started, 1)))
        spent["prefill"] = spent.get("prefill", 0.0) + time.perf_counter() - started
splits_module.prefill_instances = prefill_instances
timed(run_module, "compare", "held-out comparison")
timed(run_module, "report", "report")
timed(lukv_module, "run_curves", "lukv curves")
timed(loop_module, "resume_search", "search")
started = time.perf_counter()
try:
    main.main(["search", *sys.argv[1:]], standalone_mode=False)
finally:
    spent["total"] = time.perf_counter() - started
    print("PHASES " + json.dumps({k: round(v, 1) for k, v in spent.items()}), flush=True)
    print("PREFILL CALLS (instances, seconds) " + json.dumps(calls), flush=True)
