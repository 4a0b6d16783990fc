"""JSON-RPC error codes of the MCP server, over real stdio and real streamable HTTP.

An unknown prompt, a prompt without its required argument, an unknown resource and a resource
template argument that names nothing are the client's mistakes: -32602 (invalid params) with a
message naming the value, and no ERROR traceback in the server's log (the SDK alone answered
code 0 for an unknown prompt and logged a traceback).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_proc import http_server, stdio_exchange

pytestmark = [pytest.mark.e2e]

INVALID_PARAMS = -32602
#: (method, params, text the message must contain)
BAD_REQUESTS: list[tuple[str, dict[str, Any], str]] = [
    ("prompts/get", {"name": "no_such_prompt"}, "unknown prompt 'no_such_prompt'"),
    ("prompts/get", {"name": "mimir_context", "arguments": {}}, "needs the argument(s): task"),
    ("resources/read", {"uri": "mimir://nothing-here"}, "mimir://nothing-here"),
    ("resources/read", {"uri": "mimir://lessons/les_missing"}, "les_missing"),
]


def _no_error_logged(stderr: str) -> None:
    assert "Traceback" not in stderr and " ERROR " not in stderr, stderr


def test_invalid_params_over_stdio(tmp_path: Path) -> None:
    requests = [
        {"id": i, "method": method, "params": params}
        for i, (method, params, _) in enumerate(BAD_REQUESTS)
    ]
    replies, stderr = stdio_exchange(tmp_path / "home", requests)
    for i, (_method, _params, text) in enumerate(BAD_REQUESTS):
        error = replies[i].get("error")
        assert error is not None, replies[i]
        assert error["code"] == INVALID_PARAMS, (BAD_REQUESTS[i], error)
        assert text in error["message"], (BAD_REQUESTS[i], error)
    assert "mimir_context" in replies[0]["error"]["message"]  # the prompts there are, named
    _no_error_logged(stderr)


def test_invalid_params_over_http(tmp_path: Path) -> None:
    with http_server(tmp_path / "home") as server:

        async def main() -> None:
            async with Client(server.url, mode="legacy", read_timeout_seconds=60) as c:
                calls = [
                    lambda: c.get_prompt("no_such_prompt"),
                    lambda: c.get_prompt("mimir_context", {}),
                    lambda: c.read_resource("mimir://nothing-here"),
                    lambda: c.read_resource("mimir://lessons/les_missing"),
                ]
                for call, (_m, _p, text) in zip(calls, BAD_REQUESTS, strict=True):
                    with pytest.raises(MCPError) as err:
                        await call()
                    assert err.value.code == INVALID_PARAMS, (text, err.value.error)
                    assert text in err.value.message
                # A good request still works on the same session.
                got = await c.get_prompt("mimir_context", {"task": "deploy the app"})
                assert got.messages

        anyio.run(main)
    _no_error_logged(server.stderr)
