"""Streamable HTTP for the MCP server: loopback by default, a bearer token for anything else."""

from __future__ import annotations

import hmac
import ipaddress
import sys
from typing import Any

from mimir_core.errors import ConfigError

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


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
    if token is not None and len(token) < 16:
        raise ConfigError("the bearer token must be at least 16 characters long")


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


def build_app(server: Any, *, host: str, path: str = "/mcp", token: str | None = None) -> Any:
    """The ASGI app of ``server`` (an ``MCPServer``), token-checked when ``token`` is set."""
    from mcp.server.transport_security import TransportSecuritySettings

    security = None
    if not is_loopback(host):
        # The SDK's DNS-rebinding guard only knows loopback names; the token protects this bind.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(
        streamable_http_path=path, host=host, transport_security=security
    )
    return BearerAuth(app, token) if token else app


def serve_http(
    server: Any, *, host: str, port: int, path: str = "/mcp", token: str | None = None
) -> None:
    """Serve ``server`` over streamable HTTP until interrupted."""
    import uvicorn

    app = build_app(server, host=host, path=path, token=token)
    shown = f"[{host}]" if ":" in host else host
    print(f"mimir mcp: serving http://{shown}:{port}{path}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    uvicorn.Server(config).run()
