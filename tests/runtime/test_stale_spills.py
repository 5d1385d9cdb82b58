"""A killed process's temporary spill folder is removed by the next process that spills."""

import os
import signal
import subprocess
import sys
import tempfile

from evolalloc.runtime import stale_spills

CHILD = """
import sys, time
from evolalloc.runtime.stale_spills import temporary_folder
folder = temporary_folder()
open(folder.name + "/record.safetensors", "wb").write(b"x" * 1000)
print(folder.name, flush=True)
time.sleep(600)
"""


def test_a_sigkilled_processs_folder_goes_while_live_foreign_and_old_ones_stay(tmp_path, monkeypatch):
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "TMPDIR": str(tmp_path)})
    killed = tmp_path / os.path.basename(child.stdout.readline().strip())
    assert (killed / "record.safetensors").exists()
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    host = stale_spills._host()
    live = tmp_path / f"{stale_spills.PREFIX}{host}-{os.getpid()}-live"
    foreign = tmp_path / f"{stale_spills.PREFIX}otherhost-{child.pid}-x"
    old_style = tmp_path / f"{stale_spills.PREFIX}abc123"
    for folder in (live, foreign, old_style):
        folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    fresh = stale_spills.temporary_folder()

    assert not killed.exists()
    assert live.exists() and foreign.exists() and old_style.exists()
    assert os.path.basename(fresh.name).startswith(f"{stale_spills.PREFIX}{host}-{os.getpid()}-")
    fresh.cleanup()
