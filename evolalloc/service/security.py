"""Two guards in front of every route: the bearer token on writes, and the request-size limit.

Both are plain ASGI middleware, so they cover every route, including ones added later: a write
is any method but GET, HEAD and OPTIONS. The size limit trusts no ``Content-Length`` header alone:
it counts the bytes as they arrive, so a chunked upload is cut off as well.
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


class TokenGuard:
    """With a token configured, a write without ``Authorization: Bearer <token>`` gets a 401."""

    def __init__(self, app, token: str | None):
        self.app = app
        self.token = token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self.token is None or scope["method"] in READ_METHODS:
            return await self.app(scope, receive, send)
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            message = "this service needs 'Authorization: Bearer <token>' for writes" if not header else "wrong token"
            return await _send_json(send, 401, {"error": message}, [(b"www-authenticate", b"Bearer")])
        return await self.app(scope, receive, send)


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
