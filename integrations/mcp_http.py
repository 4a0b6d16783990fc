"""Streamable HTTP for the MCP server: loopback by default, a bearer token for anything else.

The generic guards (body and concurrency limits, the bearer token, the bind checks) are in
:mod:`mimir_integrations.http_guard`; this module adds what is MCP's: the SDK's DNS-rebinding
guard on any loopback address (all of 127.0.0.0/8, ::1, localhost), and the SDK's app behind the
guards.
"""

from __future__ import annotations

import sys
from typing import Any

from mimir_core.extras import requires_extra

from .http_guard import MAX_BODY_BYTES, MAX_IN_FLIGHT, BearerAuth, Limits, bind, is_loopback


def rebinding_guard(host: str) -> Any:
    """The SDK's Host/Origin check for a loopback ``host`` (any address of 127.0.0.0/8 as
    well as the three the SDK knows), ``None`` for any other host (the token guards it)."""
    with requires_extra("mimir_integrations.mcp_http", "mcp"):
        from mcp.server.transport_security import TransportSecuritySettings

    if not is_loopback(host):
        return None
    bare = host.strip("[]")
    named = f"[{bare}]" if ":" in bare else bare
    hosts = {named, "127.0.0.1", "localhost", "[::1]"}
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted({*hosts, *(f"{h}:*" for h in hosts)}),
        allowed_origins=sorted(
            {*(f"http://{h}" for h in hosts), *(f"http://{h}:*" for h in hosts)}
        ),
    )


def build_app(
    server: Any,
    *,
    host: str,
    path: str = "/mcp",
    token: str | None = None,
    max_body: int = MAX_BODY_BYTES,
    max_in_flight: int = MAX_IN_FLIGHT,
) -> Any:
    """The ASGI app of ``server`` (an ``MCPServer``): limits first, then the token (when set),
    then the SDK's app with the DNS-rebinding guard on any loopback host."""
    with requires_extra("mimir_integrations.mcp_http", "mcp"):
        from mcp.server.transport_security import TransportSecuritySettings

    security = rebinding_guard(host)
    if security is None:
        # The SDK's DNS-rebinding guard only knows loopback names; the token protects this bind.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        transport_security=security,
        max_request_body_size=max_body,
    )
    app = BearerAuth(app, token) if token else app
    return Limits(app, max_body=max_body, max_in_flight=max_in_flight)


def serve_http(
    server: Any, *, host: str, port: int, path: str = "/mcp", token: str | None = None
) -> None:
    """Serve ``server`` over streamable HTTP until interrupted (the port bound first)."""
    with requires_extra("mimir_integrations.mcp_http", "mcp"):
        import uvicorn

    sock = bind(host, port)
    try:
        app = build_app(server, host=host, path=path, token=token)
        shown = f"[{host}]" if ":" in host else host
        print(f"mimir mcp: serving http://{shown}:{port}{path}", file=sys.stderr, flush=True)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
