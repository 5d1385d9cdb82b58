"""The FastAPI application: state, error handlers, guards, the web page. Routes: ``api_*.py``.

``open_service(settings)`` claims the runs dir (one service per runs dir and database: a second
one would launch the same jobs) and opens the database; ``create_app(service)`` wraps it in the
HTTP application, whose start-up starts the scheduler and whose shutdown stops the workers.

Every error is JSON ``{"error": message}`` (plus ``field`` for a bad field), never a traceback:
a ``UserError`` is a 422, an unknown route or id a 404, anything unexpected a 500 whose details
stay in the service's log.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from evolalloc import __version__
from evolalloc.core.errors import UserError
from evolalloc.service.db import make_engine, make_sessions
from evolalloc.service.jobs import JobError, JobRunner
from evolalloc.service.security import BodyLimit, BodyTooLarge, BrowserGuard, TokenGuard
from evolalloc.service.settings import ServiceSettings
from evolalloc.service.validator import Validator

log = logging.getLogger("evolalloc.service")


@dataclass
class Service:
    settings: ServiceSettings
    sessions: object
    runner: JobRunner
    validator: Validator
    lock_handle: object
    studies: object = None  # StudyManager (ask/tell studies)


def open_service(settings: ServiceSettings) -> Service:
    """Claim ``settings.runs_dir`` and open the database; ``UserError`` if another service has it."""
    settings.service_dir.mkdir(parents=True, exist_ok=True)
    handle = open(settings.service_dir / "service.lock", "a+")  # noqa: SIM115 - held while serving
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise UserError("another evolalloc service is using this runs dir", source=str(settings.runs_dir)) from None
    import evolalloc.service.study_db  # noqa: F401 - its tables join Base before create_all
    from evolalloc.service.db_claim import claim_database
    from evolalloc.service.studies import StudyManager, register_study_profiles

    sessions = make_sessions(make_engine(settings.db_url))
    try:
        claim_database(sessions, str(settings.runs_dir))
    except UserError:
        handle.close()
        raise
    return Service(settings, sessions, JobRunner(settings, sessions), Validator(), handle,
                   StudyManager(sessions, on_finish=register_study_profiles, lease_key=_lease_key(settings)))


def _lease_key(settings: ServiceSettings) -> bytes:
    """The key lease secrets are made with: kept in the service dir (owner-only), so leases
    handed out before a restart still hold after it."""
    path = settings.service_dir / "lease.key"
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(os.urandom(32))
    return path.read_bytes()


def _error(status: int, message: str, field: str | None = None, headers: dict | None = None) -> JSONResponse:
    payload = {"error": message}
    if field:
        payload["field"] = field
    return JSONResponse(payload, status_code=status, headers=headers)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(UserError)
    async def user_error(_request: Request, err: UserError):
        return _error(422, str(err), err.field)

    @app.exception_handler(JobError)
    async def job_error(_request: Request, err: JobError):
        return _error(err.status, f"{err.field}: {err}" if err.field else str(err), err.field, err.headers)

    @app.exception_handler(BodyTooLarge)
    async def too_large(_request: Request, err: BodyTooLarge):
        return _error(413, str(err))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, err: StarletteHTTPException):
        message = err.detail if isinstance(err.detail, str) else "request refused"
        if err.status_code == 404 and message == "Not Found":
            message = "no such resource"
        return _error(err.status_code, message, headers=getattr(err, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def bad_request(_request: Request, err: RequestValidationError):
        if any(tuple(e.get("loc", ()))[:1] == ("path",) for e in err.errors()):
            # An id that cannot exist (``/jobs/abc``) is as unknown as one that does not: 404 everywhere.
            return _error(404, "no such resource")
        first = err.errors()[0] if err.errors() else {"loc": (), "msg": "invalid request"}
        field = ".".join(str(part) for part in first.get("loc", ()) if part not in ("query", "path", "body"))
        return _error(422, f"{field}: {first['msg']}" if field else first["msg"], field or None)

    @app.exception_handler(RecursionError)
    async def too_deep(_request: Request, _err: RecursionError):
        # A JSON document nested thousands deep (parsing it recurses): the client's error, not ours.
        return _error(422, "the document is nested too deeply")

    @app.exception_handler(Exception)
    async def internal(_request: Request, err: Exception):
        log.exception("unexpected error")
        return _error(500, "internal error; the service log has the details")


def create_app(service: Service) -> FastAPI:
    from evolalloc.service import api_jobs, api_profiles, api_studies

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        service.runner.start()
        threading.Thread(target=service.validator.start, daemon=True, name="validator-warmup").start()
        try:
            yield
        finally:
            service.runner.stop()
            service.validator.stop()

    app = FastAPI(title="evolalloc service", version=__version__, lifespan=lifespan,
                  description="Submit KV-cache budget searches, watch them, and fetch budget profiles.")
    app.state.service = service
    _install_error_handlers(app)
    app.include_router(api_jobs.router)
    app.include_router(api_profiles.router)
    app.include_router(api_studies.router)

    static = resources.files("evolalloc.service").joinpath("static")
    app.mount("/static", StaticFiles(directory=str(static)), name="static")

    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(str(static.joinpath("index.html")), media_type="text/html")

    @app.get("/health", tags=["service"])
    async def health():
        """Liveness, version, and whether writes need a token."""
        return {"status": "ok", "version": __version__, "max_jobs": service.settings.max_jobs,
                "token_required": service.settings.token is not None or service.settings.read_token is not None,
                "read_token_required": service.settings.read_token is not None}

    # Added innermost first: the size limit (outermost) sees the bytes before anything reads them,
    # then the browser checks, then the tokens.
    settings = service.settings
    app.add_middleware(TokenGuard, token=settings.token, read_token=settings.read_token)
    app.add_middleware(BrowserGuard, host=settings.host, allowed_hosts=settings.allowed_hosts)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    return app
