"""Shared parts of the security and property tests: real hooks in process, a recording
embedder, an in-process MCP client, and a leak finder over every file of a home."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from mimir_core.embed.core import HashEmbedder

ROOT = Path(__file__).resolve().parents[2]
CORPUS: dict[str, Any] = json.loads((ROOT / "tests" / "data" / "secrets_corpus.json").read_text())
SECRETS: list[dict[str, str]] = CORPUS["secrets"]
#: A Claude Code failed tool call, as its PostToolUseFailure hook receives it.
FAILED_CALL: dict[str, Any] = {
    "session_id": "s1",
    "hook_event_name": "PostToolUseFailure",
    "tool_name": "Bash",
    "tool_input": {"command": "make deploy"},
    "error": "Exit code 2",
}


class RecordingEmbedder:
    """The hash embedder, remembering every text it was asked to embed."""

    def __init__(self) -> None:
        self.inner = HashEmbedder()
        self.name = self.inner.name
        self.dim = self.inner.dim
        self.seen: list[str] = []
        self.mark = 0  # len(seen) when the writes ended (later texts are queries)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.extend(texts)
        return self.inner.embed(texts)


def fragments(secret: str) -> list[str]:
    """The secret and its 12-character windows (a partial leak is still a leak)."""
    if len(secret) <= 12:
        return [secret]
    step = max(1, min(6, (len(secret) - 12) // 8 or 1))
    return [secret, *(secret[i : i + 12] for i in range(0, len(secret) - 11, step)), secret[-12:]]


def leaks(secrets: Sequence[str], haystack: str | bytes) -> list[str]:
    """The secrets (some fragment of which) occur in ``haystack``."""
    blob = haystack if isinstance(haystack, bytes) else haystack.encode("utf-8", "replace")
    return [s for s in secrets if any(f.encode() in blob for f in fragments(s))]


def files_blob(root: Path) -> bytes:
    """Every byte of every file under ``root`` (store, old table versions, spool, logs)."""
    return b"\n".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


@contextmanager
def hook_env(home: Path, **extra: str) -> Iterator[None]:
    """The environment a host gives a hook (no background jobs)."""
    env = {"MIMIR_HOME": str(home), "MIMIR_AUTO_CONSOLIDATE": "0", **extra}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_hook_inprocess(home: Path, args: Sequence[str], raw: bytes) -> tuple[int, str]:
    """``mimir hook ARGS`` in this process: stdin ``raw``; returns (exit code, stdout)."""
    from mimir_integrations import hooks

    old_in, old_out = sys.stdin, sys.stdout
    sys.stdin = io.TextIOWrapper(io.BytesIO(raw))
    out = io.StringIO()
    sys.stdout = out
    try:
        with hook_env(home):
            rc = hooks.main([*args, "--home", str(home)])
    finally:
        sys.stdin, sys.stdout = old_in, old_out
    return rc, out.getvalue()


class MCPSession:
    """A synchronous in-process MCP client on ``build_server(mimir)`` (as the contract tests)."""

    def __init__(self, mimir: Any) -> None:
        self.mimir = mimir

    def __enter__(self) -> MCPSession:
        import anyio.from_thread
        from mcp import Client

        from mimir_integrations.mcp_server import build_server

        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        self._client_cm = self.portal.wrap_async_context_manager(
            Client(build_server(self.mimir, background=False), mode="auto")
        )
        self.client = self._client_cm.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._client_cm.__exit__(None, None, None)
        self._portal_cm.__exit__(None, None, None)

    def call(self, name: str, args: Any) -> tuple[str, bool]:
        """(text, is_error) of one tool call."""
        result = self.portal.call(self.client.call_tool, name, args)
        text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
        return text, bool(result.is_error)
