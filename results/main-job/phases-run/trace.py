"""Run the evolalloc CLI with a phase listener that logs when each phase starts (wall seconds)."""
import sys, time
from evolalloc.core import phases
t0 = time.time()
last = [None]
log = open(sys.argv[1], "w")
def listener(phase, done, total):
    if phase != last[0] or phase in ("comparing", "prefilling"):
        log.write(f"{time.time()-t0:8.1f} {phase} {done}/{total}\n"); log.flush(); last[0] = phase
phases.listen(listener)
sys.argv = ["evolalloc"] + sys.argv[2:]
from evolalloc.cli import run
try:
    run()
finally:
    log.write(f"{time.time()-t0:8.1f} end\n"); log.close()
