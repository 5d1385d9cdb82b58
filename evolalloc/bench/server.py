"""A real ``evolalloc serve`` in a subprocess on a free loopback port, for the service benchmarks
and the service tests: started, waited for until ``/health`` answers, stopped or killed.

The server's environment: one OpenMP thread (it shares the cores with its clients), this
checkout first on ``PYTHONPATH`` (so the subprocess runs the same code as its caller), and no
``EVOLALLOC_SERVICE_TOKEN`` inherited from the caller's shell unless ``token`` is given.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]  # the checkout (or site-packages) that holds evolalloc


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServeProcess:
    """``evolalloc serve --runs-dir RUNS --max-jobs N [extra...]`` on ``port`` (default: a free one).

    ``log``: the server's stdout and stderr are appended there. ``start_timeout``: seconds to wait
    for ``/health`` before giving up (``RuntimeError``, the server killed).
    """

    def __init__(self, runs_dir: Path, *, log: Path, max_jobs: int = 0, token: str | None = None, extra: tuple = (),
                 port: int | None = None, cwd: Path | None = None, start_timeout: float = 120.0):
        self.runs_dir, self.log, self.max_jobs, self.token, self.extra = (
            Path(runs_dir),
            Path(log),
            max_jobs,
            token,
            extra,
        )
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cwd, self.start_timeout = cwd, start_timeout
        self.process: subprocess.Popen | None = None

    def start(self) -> "ServeProcess":
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        env.pop("EVOLALLOC_SERVICE_TOKEN", None)
        if self.token:
            env["EVOLALLOC_SERVICE_TOKEN"] = self.token
        command = [sys.executable, "-m", "evolalloc", "serve", "--port", str(self.port), "--runs-dir",
                   str(self.runs_dir),
                   "--max-jobs", str(self.max_jobs), *self.extra]
        with open(self.log, "a") as log:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(command, cwd=self.cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the service exited during start-up: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"the service did not answer within {self.start_timeout:g} s")

    def kill(self) -> None:
        """SIGKILL, as a crash would end it."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        """SIGTERM (a graceful shutdown), then SIGKILL after 20 s; harmless if it is not running."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> "ServeProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
