"""What one service process is configured with, checked before it binds a socket.

Safety rule: on a loopback address the service may run without a token (only this machine's
users can reach it); on any other address it refuses to start without one, and then every
write (``POST``) needs ``Authorization: Bearer <token>``. The token comes from the environment
variable ``EVOLALLOC_SERVICE_TOKEN`` or a file (``--token-file``), never from the command line
(other users can read a process's arguments).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

from evolalloc.core.errors import UserError
from evolalloc.service.job_limits import JobLimits

TOKEN_ENV = "EVOLALLOC_SERVICE_TOKEN"
SERVICE_DIR = ".service"  # inside the runs dir: database, worker logs, locks (no run can be named so)
DEFAULT_MAX_BODY = 1 << 20  # 1 MiB: a recipe or an allocation file is a few KiB


@dataclass(frozen=True)
class ServiceSettings:
    runs_dir: Path
    db_url: str
    host: str = "127.0.0.1"
    port: int = 8700
    max_jobs: int = 1
    token: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY
    # What a submitted recipe may reach (``confinement.py``): folders its file parameters and
    # model spec may name, and where Ray is; the recipe never chooses a Ray address itself.
    data_roots: tuple[Path, ...] = ()
    model_roots: tuple[Path, ...] = ()
    ray_address: str = "local"
    read_token: str | None = None  # if set, reads need it (or the write token) too
    allowed_hosts: tuple[str, ...] = ()  # extra Host names besides the bound address and loopback names
    limits: JobLimits = field(default_factory=JobLimits)  # job sizes, queue, wall time (``job_limits.py``)

    @property
    def service_dir(self) -> Path:
        return self.runs_dir / SERVICE_DIR


def default_db_url(runs_dir: Path) -> str:
    return f"sqlite:///{(runs_dir / SERVICE_DIR / 'service.db').as_posix()}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost: it may resolve to anything


def _read_file_token(token_file: str | os.PathLike) -> str:
    try:
        token = Path(token_file).read_text(encoding="utf-8").strip()
    except OSError as err:
        raise UserError(f"cannot read the token file: {err}", source=str(token_file)) from None
    if not token:
        raise UserError("the token file is empty", source=str(token_file))
    return token


def read_token(token_file: str | os.PathLike | None) -> str | None:
    """The token from ``token_file`` if given, else from ``EVOLALLOC_SERVICE_TOKEN``, else None."""
    if token_file is not None:
        return _read_file_token(token_file)
    token = os.environ.get(TOKEN_ENV, "").strip()
    return token or None


def _roots(paths, option: str) -> tuple[Path, ...]:
    """Operator-named folders, resolved once (symlinks too): each must exist and be a folder."""
    roots = []
    for given in paths or ():
        path = Path(given).expanduser().resolve()  # the operator's own shell words: ~ is theirs to use
        if not path.is_dir():
            raise UserError(f"{given} is not a folder", field=option)
        roots.append(path)
    return tuple(roots)


def make_settings(*, runs_dir, db_url=None, host="127.0.0.1", port=8700, max_jobs=1, token_file=None,
                  max_body_bytes=DEFAULT_MAX_BODY, data_roots=(), model_roots=(), ray_address=None,
                  read_token_file=None, allowed_hosts=(), limits: JobLimits | None = None) -> ServiceSettings:
    """Checked settings; ``UserError`` for a public bind without a token or a bad value."""
    runs_dir = Path(runs_dir).resolve()
    token = read_token(token_file)
    if not is_loopback(host) and token is None:
        raise UserError(
            f"refusing to listen on {host} without a token: set {TOKEN_ENV} or pass --token-file "
            "(every write will then need 'Authorization: Bearer <token>')", field="--host")
    if token is not None and len(token) < 16:
        raise UserError("the token must be at least 16 characters", field="token")
    if max_jobs < 0:
        raise UserError(f"must be >= 0, got {max_jobs}", field="--max-jobs")
    if max_body_bytes < 1024:
        raise UserError(f"must be >= 1024, got {max_body_bytes}", field="--max-body")
    ray_address = ray_address or "local"
    if ray_address not in ("local", "auto") and not ray_address.startswith("ray://"):
        raise UserError(f"must be local, auto or ray://host:port, got {ray_address!r}", field="--ray-address")
    reader = None
    if read_token_file is not None:
        reader = _read_file_token(read_token_file)
        if len(reader) < 16:
            raise UserError("the read token must be at least 16 characters", field="--read-token-file")
    return ServiceSettings(runs_dir=runs_dir, db_url=db_url or default_db_url(runs_dir), host=host, port=port,
                           max_jobs=max_jobs, token=token, max_body_bytes=max_body_bytes,
                           data_roots=_roots(data_roots, "--data-root"),
                           model_roots=_roots(model_roots, "--model-root"),
                           ray_address=ray_address, read_token=reader,
                           allowed_hosts=tuple(h.lower() for h in allowed_hosts), limits=limits or JobLimits())
