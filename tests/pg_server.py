"""A throw-away PostgreSQL server for storage tests: Debian's ``postgresql`` package, started on a
free local port with trust authentication, its data and socket in a temporary folder.

PostgreSQL refuses to run as root, so as root the server runs as the ``postgres`` user
(``runuser``). Tests using it are skipped, with the reason, when the binaries, the user or the
``psycopg`` driver (``evolalloc[postgres]``) are missing, or the server does not start.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from evolalloc.bench.server import free_port

USER = "evolalloc"


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    return Path(found[-1]).parent if found else None


@pytest.fixture(scope="session")
def postgres_url():
    """``postgresql://evolalloc@127.0.0.1:<port>/postgres`` of a server running for the session."""
    pytest.importorskip("psycopg", reason="the PostgreSQL driver is missing: pip install 'evolalloc[postgres]'")
    bin_dir = _bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries not found (Debian: apt-get install -y postgresql)")
    as_user: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="evolalloc-pg-"))
    if os.geteuid() == 0:
        try:
            account = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(base)
            pytest.skip("running as root and there is no 'postgres' user to run the server as")
        os.chown(base, account.pw_uid, account.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = base / "data", free_port()

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*as_user, *args], capture_output=True, text=True, timeout=120, cwd=base)

    started = False
    try:
        done = run(str(bin_dir / "initdb"), "-D", str(data), "--auth=trust", f"--username={USER}", "--locale=C",
                   "--encoding=UTF8", "--no-sync")
        if done.returncode != 0:
            pytest.skip(f"initdb failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
        options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"
        done = run(str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "server.log"), "-w",
                   "-t", "60", "start")
        if done.returncode != 0:
            log = (base / "server.log").read_text() if (base / "server.log").exists() else done.stderr
            pytest.skip(f"the PostgreSQL server did not start: {log.strip().splitlines()[-1:]}")
        started = True
        yield f"postgresql://{USER}@127.0.0.1:{port}/postgres"
    finally:
        if started:
            run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)
