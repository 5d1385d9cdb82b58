"""Guards in front of every route: the request-size limit, the browser checks (Host, Origin,
Content-Type) and the bearer tokens (writes; reads too with a read token).

All are plain ASGI middleware, so they cover every route, including ones added later: a write
is any method but GET, HEAD and OPTIONS. The size limit trusts no ``Content-Length`` header alone:
it counts the bytes as they arrive, so a chunked upload is cut off as well.

Why the browser checks: a tokenless service on loopback is reachable from any web page the
operator opens. A cross-site form or ``fetch`` can send a POST (as ``text/plain``, a form, or a
blob without a type) but always with its ``Origin``; a DNS-rebinding page can even read, but its
requests carry its own host name in ``Host``. So: ``Host`` must name this service (the bound
address, a loopback name, or an ``--allowed-host``), a write whose ``Origin`` is another site is
refused, and a write's body must be declared YAML or JSON (or undeclared, from a non-browser).
"""

from __future__ import annotations

import hmac
import json

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class BodyTooLarge(Exception):
    """Raised while reading a body past the limit; the app turns it into a 413."""

    def __init__(self, limit: int):
        super().__init__(f"the request body is larger than the limit of {limit} bytes")
        self.limit = limit


async def _send_json(send, status: int, payload: dict, headers: list | None = None) -> None:
    body = json.dumps(payload).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


# Reads a read token never guards: the page's own files (its data comes from guarded routes),
# liveness, and the API's description.
OPEN_PATHS = ("/", "/health", "/docs", "/openapi.json", "/docs/oauth2-redirect")
BODY_TYPES = frozenset({"application/json", "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


def _matches(given: str, secret: str | None) -> bool:
    return secret is not None and hmac.compare_digest(given.encode(), secret.encode())


class TokenGuard:
    """With a token configured, a write without ``Authorization: Bearer <token>`` gets a 401; with a
    read token configured, so does a read without either token (but ``OPEN_PATHS`` and the page's files)."""

    def __init__(self, app, token: str | None, read_token: str | None = None):
        self.app = app
        self.token = token
        self.read_token = read_token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        read = scope["method"] in READ_METHODS
        if read and (self.read_token is None or scope["path"] in OPEN_PATHS or scope["path"].startswith("/static/")):
            return await self.app(scope, receive, send)
        if not read and self.token is None and self.read_token is None:
            return await self.app(scope, receive, send)
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        scheme, _, given = header.partition(" ")
        given = given.strip()
        # The write token also reads; the read token reads, and writes only where no write token is set.
        allowed = _matches(given, self.token) or ((read or self.token is None) and _matches(given, self.read_token))
        if scheme.lower() != "bearer" or not allowed:
            what = "reads" if read else "writes"
            message = f"this service needs 'Authorization: Bearer <token>' for {what}" if not header else "wrong token"
            return await _send_json(send, 401, {"error": message, "field": "Authorization"},
                                    [(b"www-authenticate", b"Bearer")])
        return await self.app(scope, receive, send)


def _host_name(value: str) -> str:
    """``Host`` / origin authority without its port, lower case (``[::1]:8700`` -> ``::1``)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class BrowserGuard:
    """Refuse a foreign ``Host`` (DNS rebinding), a cross-site write, and a write body that is not
    declared YAML or JSON; each a 4xx naming the header."""

    def __init__(self, app, host: str, allowed_hosts: tuple[str, ...] = ()):
        self.app = app
        extra = {_host_name(h) for h in allowed_hosts}
        if host.lower() in WILDCARD_HOSTS and not extra:
            self.hosts = None  # every interface, no names given: the token guards it (it is required there)
        else:
            self.hosts = LOOPBACK_NAMES | extra | ({host.lower()} if host.lower() not in WILDCARD_HOSTS else set())

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1")
        if self.hosts is not None and _host_name(host) not in self.hosts:
            return await _send_json(send, 421, {"error": f"Host: {host!r} does not name this service "
                                                         "(the operator adds names with serve --allowed-host)",
                                                "field": "Host"})
        if scope["method"] in READ_METHODS:
            return await self.app(scope, receive, send)
        origin = headers.get(b"origin", b"").decode("latin-1").strip()
        fetch_site = headers.get(b"sec-fetch-site", b"").decode("latin-1").strip().lower()
        if origin and (origin == "null" or _authority(origin) != host.strip().lower()) or fetch_site == "cross-site":
            return await _send_json(send, 403, {"error": f"Origin: a write from another site ({origin or fetch_site}) "
                                                         "is refused", "field": "Origin"})
        length = headers.get(b"content-length", b"0")
        has_body = b"chunked" in headers.get(b"transfer-encoding", b"") or (length.isdigit() and int(length) > 0)
        kind = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
        browser = bool(origin or fetch_site)
        if has_body and (kind not in BODY_TYPES if kind else browser):
            return await _send_json(send, 415, {"error": f"Content-Type: a request body must be application/yaml or "
                                                         f"application/json, got {kind or 'none'}",
                                                "field": "Content-Type"})
        return await self.app(scope, receive, send)


def _authority(origin: str) -> str:
    """``scheme://host:port`` -> ``host:port`` (what a same-origin request's ``Host`` reads)."""
    return origin.split("://", 1)[-1].rstrip("/").lower()


class BodyLimit:
    """Refuse bodies over ``max_bytes`` with a 413, by header when given, else while reading."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await _send_json(send, 413, {"error": str(BodyTooLarge(self.max_bytes))})
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        return await self.app(scope, counted, send)
