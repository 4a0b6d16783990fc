"""Guards for any HTTP server Mimir runs (the MCP server today): loopback by default, a bearer
token for anything else, bounded requests.

Nothing here knows MCP; the adapter wraps its ASGI app in these. :class:`Limits` keeps one
client from taking the memory: a body larger than :data:`MAX_BODY_BYTES` is refused by its
``Content-Length`` before a byte is read (and a chunked one is cut off at the cap), and at most
:data:`MAX_IN_FLIGHT` POSTs are handled at once (more get 503 with ``Retry-After``).
:class:`BearerAuth` checks the token in constant time. :func:`check_bind` refuses a non-loopback
bind without a token, and :func:`bind` binds the port before anything says "serving": a port in
use is one :class:`~mimir_core.errors.ConfigError`.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from typing import Any

from mimir_core.errors import ConfigError

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
#: A bearer token needs at least this many non-space characters.
MIN_TOKEN_CHARS = 16
#: Largest request body accepted (a tool call with every field at its limit is ~40 KB).
MAX_BODY_BYTES = 1024 * 1024
#: POST requests handled at once; more are answered 503 (bounded memory under a flood).
MAX_IN_FLIGHT = 32


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, *, allow_remote: bool, token: str | None) -> None:
    """Refuse a bind that would expose the memory to the network without a token."""
    if not is_loopback(host):
        if not allow_remote:
            raise ConfigError(
                f"--host {host!r} is not a loopback address: other machines could read and "
                "write this memory. Pass --allow-remote and a bearer token (--token or "
                "MIMIR_MCP_TOKEN) to allow it"
            )
        if not token:
            raise ConfigError(f"--allow-remote with --host {host!r} needs a bearer token")
    if token is not None and sum(not c.isspace() for c in token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"the bearer token must be at least {MIN_TOKEN_CHARS} characters long "
            "(not counting spaces)"
        )
    if token is not None and token != token.strip():
        raise ConfigError("the bearer token must not start or end with a space")


async def _refuse(send: Any, status: int, message: str, extra: list[Any] | None = None) -> None:
    body = ('{"error": "' + message + '"}').encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Limits:
    """ASGI middleware: bounded request bodies and a bounded number of POSTs in flight."""

    def __init__(
        self, app: Any, *, max_body: int = MAX_BODY_BYTES, max_in_flight: int = MAX_IN_FLIGHT
    ) -> None:
        self.app = app
        self.max_body = max_body
        self.max_in_flight = max_in_flight
        self.in_flight = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _refuse(send, 400, "bad Content-Length")
                return
            if size > self.max_body:  # refused unread: the body never reaches memory
                await _refuse(send, 413, f"request body over {self.max_body} bytes")
                return
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.max_in_flight:
            await _refuse(send, 503, "server busy, retry later", [(b"retry-after", b"1")])
            return
        self.in_flight += 1
        try:
            await self._capped(scope, receive, send)
        finally:
            self.in_flight -= 1

    async def _capped(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The app with a chunked body stopped at the cap: past it the app is told the client
        left (nothing more is read), whatever it answers is dropped, and the client gets 413."""
        seen = 0
        over = False
        started = False

        async def capped_receive() -> Any:
            nonlocal seen, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message.get("type") == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Any) -> None:
            nonlocal started
            if over:
                return
            started = True
            await send(message)

        await self.app(scope, capped_receive, guarded_send)
        if over and not started:
            await _refuse(send, 413, f"request body over {self.max_body} bytes")


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(got, self._expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="mimir"'),
                        ],
                    }
                )
                body = b'{"error": "missing or wrong bearer token"}'
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; a port in use (or any bind failure) is a
    :class:`ConfigError` naming the address, raised before anything claims to serve."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    try:
        addr = socket.getaddrinfo(host.strip("[]"), port, family, socket.SOCK_STREAM)[0][4]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise ConfigError(f"cannot bind {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        why = "the port is in use" if exc.errno == 98 else (exc.strerror or str(exc))
        raise ConfigError(f"cannot listen on {host}:{port}: {why}") from None
    sock.set_inheritable(True)
    return sock
