"""A stdlib front for ``mimir mcp`` over stdio: the handshake and ``tools/list`` answered while
the SDK is still importing.

Importing the ``mcp`` SDK (pydantic models for both protocol eras) takes one to two seconds, and
a client waits for ``initialize`` and ``tools/list`` before it can do anything. The answers to
those requests depend only on the server's code and the request, so the front answers them from a
cache of the SDK's own answers (the exact bytes it wrote, kept in ``<home>/cache/mcp-early.json``)
while the SDK loads on the main thread:

* a reader thread reads the client's lines from the real stdin. ``initialize`` (legacy 2025
  clients, keyed by the requested protocol version), then ``tools/list`` and ``server/discover``
  (keyed by era, version and params: a 2026 client's per-request ``_meta`` envelope included)
  are answered at once when the cache holds them and no other request is waiting. Every line,
  answered or not, is also forwarded, in order, to the SDK through a pipe that becomes its stdin,
  so the SDK's session state (era, negotiated version, initialisation) is exactly what it would
  be without the front; anything else simply waits for the SDK;
* a writer thread relays the SDK's output (a pipe that becomes its stdout) to the real stdout,
  dropping the SDK's duplicate answers to the requests the front already answered, after
  checking they are byte for byte what the front sent: a difference (say, the SDK was upgraded
  in place) is logged and clears the cache;
* on a cache miss the SDK's answer is recorded, so the next start answers early;
* a line the SDK's JSON parser would reject (nested too deep, a lone surrogate escape) gets a
  JSON-RPC parse error from the front (:func:`parse_error`) for the whole session: the SDK
  drops such a line without a reply, which leaves the client waiting for its timeout.

stdout stays protocol-only: until the SDK claims the descriptors, fd 1 points at stderr and fd 0
at the null device, as the SDK itself does while it serves. Any failure in setting the front up
leaves the descriptors alone and the server runs exactly as without it.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from typing import Any

from mimir_core.hosting.answer_cache import AnswerCache, files_fingerprint

log = logging.getLogger("mimir.mcp")

#: Requests answered early when cached (besides ``initialize``); none has side effects.
LISTINGS = frozenset({"tools/list", "server/discover"})
PROTOCOL_META = "io.modelcontextprotocol/protocolVersion"
#: Files whose change can change an answer: Mimir's tool specs and server, and the SDK.
_MIMIR_FILES = (
    ("mimir_core", "__init__.py"),
    ("mimir_core", "tools", "specs.py"),
    ("mimir_core", "tools", "models.py"),
    ("mimir_core", "tools", "io.py"),
    ("mimir_core", "types.py"),
    ("mimir_integrations", "mcp_server.py"),
)
_SDK_FILES = (
    ("mcp", "__init__.py"),
    ("mcp", "server", "runner.py"),
    ("mcp", "server", "lowlevel", "server.py"),
    ("mcp", "server", "mcpserver", "server.py"),
    ("mcp_types", "__init__.py"),
    ("mcp_types", "methods.py"),
)


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _id_bytes(ident: Any) -> bytes | None:
    """The id as the SDK writes it, for the ids whose rendering is unambiguous."""
    if isinstance(ident, int) and not isinstance(ident, bool):
        return str(ident).encode()
    safe = isinstance(ident, str) and len(ident) <= 200 and ident.isascii()
    if safe and all(c.isalnum() or c in "-_.:" for c in ident):
        return f'"{ident}"'.encode()
    return None


def fingerprint(package_dirs: dict[str, str]) -> str | None:
    """What the cached answers were made by (Mimir's tool specs and server, and the SDK);
    ``None`` when the SDK cannot be found (the front then answers nothing)."""
    return files_fingerprint(package_dirs, (*_MIMIR_FILES, *_SDK_FILES))


def package_dirs() -> dict[str, str]:
    """Where ``mimir_core``, ``mimir_integrations``, ``mcp`` and ``mcp_types`` live, found
    without importing the SDK (an import would cost what the front saves)."""
    here = os.path.dirname(os.path.abspath(__file__))
    import mimir_core

    found = {
        "mimir_integrations": here,
        "mimir_core": os.path.dirname(os.path.abspath(str(mimir_core.__file__))),
    }
    for entry in sys.path:
        for pkg in ("mcp", "mcp_types"):
            if pkg not in found and os.path.isfile(os.path.join(entry or ".", pkg, "__init__.py")):
                found[pkg] = os.path.abspath(os.path.join(entry or ".", pkg))
    return found


_END = b"\x00mimir-front-end\n"


#: A line with fewer brackets cannot nest as deep as the SDK's JSON parser refuses (200 levels).
_DEEP = 128


def parse_error(line: bytes) -> bytes | None:
    """The JSON-RPC parse error for a line the SDK's parser rejects (nested too deep, or a lone
    surrogate escape): the SDK drops such a line without any reply, so the client would wait
    for its timeout. ``b""`` for a notification (never answered); ``None`` for any other line.
    Only suspicious lines are parsed here (the same parser as the SDK's), so this costs nothing
    on ordinary traffic."""
    surrogate = b"\\ud" in line or b"\\uD" in line  # JSON's escape is a lowercase u
    if line.count(b"[") + line.count(b"{") < _DEEP and not surrogate:
        return None
    try:
        from pydantic_core import from_json

        from_json(line)
        return None
    except ValueError as exc:
        why = str(exc)
    except Exception:  # never let the check lose a line
        return None
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        msg = None
    if isinstance(msg, dict) and "method" in msg and "id" not in msg:
        log.warning("dropped a notification the SDK cannot parse: %s", why)
        return b""
    ident = msg.get("id") if isinstance(msg, dict) else None
    valid = isinstance(ident, (str, int)) and not isinstance(ident, bool)
    idb = json.dumps(ident).encode() if valid else b"null"
    error = json.dumps({"code": -32700, "message": f"Parse error: {why}"}).encode()
    log.warning("refused a request the SDK cannot parse: %s", why)
    return b'{"jsonrpc":"2.0","id":' + idb + b',"error":' + error + b"}\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class EarlyFront:
    """Owns the real stdin/stdout; the SDK gets pipes (see the module docstring)."""

    def __init__(self, cache: AnswerCache | None) -> None:
        self.cache = cache
        self.live = False  # the SDK is serving: no more early answers
        self._lock = threading.Lock()  # decisions, and writes to the real stdout
        self._era: str | None = None  # "legacy" after initialize, "modern" after an envelope
        self._session = ""  # the legacy session's key part (version and capabilities)
        self._waiting = False  # a request went to the SDK unanswered: keep the order
        self._sent: dict[Any, bytes] = {}  # id -> the early answer (the SDK's copy is dropped)
        self._record: dict[Any, str] = {}  # id -> cache key, for answers to remember
        self.answered_early = 0

    # -- set-up and teardown -------------------------------------------------------------------

    def start(self) -> None:
        """Take fds 0 and 1, start the reader and writer threads."""
        self._real_in = os.dup(0)
        self._real_out = os.dup(1)
        self._in_r, self._in_w = os.pipe()
        self._out_r, self._out_w = os.pipe()
        self._out_end = os.dup(self._out_w)  # ours, for the end-of-output marker
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)  # stray output while the SDK loads goes to stderr, never the wire
        self._reader = threading.Thread(target=self._read_loop, name="mcp-front-in", daemon=True)
        self._writer = threading.Thread(target=self._write_loop, name="mcp-front-out", daemon=True)
        self._reader.start()
        self._writer.start()

    def sdk_ready(self) -> None:
        """Point fds 0 and 1 at the pipes just before the SDK's stdio transport claims them."""
        with self._lock:
            self.live = True
        os.dup2(self._in_r, 0)
        os.close(self._in_r)
        os.dup2(self._out_w, 1)
        os.close(self._out_w)

    def close(self, timeout: float = 5.0) -> None:
        """After the SDK is done: let the writer flush the last answers, restore fd 1."""
        if not self.live:  # the SDK never ran: nothing will answer what was read
            os.close(self._in_r)
            os.close(self._out_w)
        # The SDK keeps a duplicate of its stdout open for good, so the pipe never reaches EOF:
        # a marker after its last line ends the writer.
        _write_all(self._out_end, _END)
        os.close(self._out_end)
        self._writer.join(timeout)
        cached = len(self.cache.entries) if self.cache is not None else 0
        log.info("mcp front: %d answered early, %d answers cached", self.answered_early, cached)
        os.dup2(self._real_out, 1)
        os.dup2(self._real_in, 0)

    # -- the client's side ---------------------------------------------------------------------

    def _read_loop(self) -> None:
        try:
            with os.fdopen(self._real_in, "rb", closefd=False) as src:
                for line in src:
                    refusal = parse_error(line)
                    if refusal is not None:  # the SDK would drop it without a word
                        if refusal:
                            with self._lock:
                                _write_all(self._real_out, refusal)
                        continue
                    answer = None
                    try:
                        with self._lock:
                            answer = self._early(line, answer=not self.live)
                            if answer is not None:
                                _write_all(self._real_out, answer)
                                self.answered_early += 1
                    except Exception:  # never lose the line: the SDK will answer it
                        log.exception("early answer failed")
                    _write_all(self._in_w, line)
        except OSError as exc:
            log.debug("front reader: %s", exc)
        finally:
            os.close(self._in_w)  # EOF for the SDK once it has read everything
            self._exit_if_done()

    def _exit_if_done(self) -> None:
        """At the client's EOF: exit now if the SDK is still loading and every request was
        answered early (a "connect, list the tools, hang up" client). Waiting for the import
        only to read EOF would outlast the client's grace period and earn a SIGTERM. A client
        that said nothing at all still gets the start-up errors (a missing extra, say)."""
        with self._lock:  # held to the end: the SDK cannot take the descriptors meanwhile
            if self.live or self._waiting or not self.answered_early:
                return  # the SDK answers what is left (or is already serving)
            log.info(
                "mcp front: client gone before the SDK loaded, %d answered early: exit",
                self.answered_early,
            )
            logging.shutdown()
            os._exit(0)

    def _early(self, line: bytes, *, answer: bool) -> bytes | None:
        """The early answer to ``line`` if allowed and cached; else notes what to record."""
        try:
            msg = json.loads(line)
        except ValueError:
            return None
        if not isinstance(msg, dict) or "method" not in msg or "id" not in msg:
            return None  # notifications (and responses) only travel to the SDK
        ident, method, params = msg["id"], msg["method"], msg.get("params")
        key = self._key(method, params)
        idb = _id_bytes(ident)
        if key is None or idb is None or ident in self._sent or ident in self._record:
            self._waiting = True
            return None
        cached = self.cache.get(key) if self.cache is not None else None
        if cached is None or self._waiting or not answer:
            self._waiting = True
            self._record[ident] = key
            return None
        reply = b'{"jsonrpc":"2.0","id":' + idb + b',"result":' + cached.encode() + b"}\n"
        self._sent[ident] = reply
        return reply

    def _key(self, method: Any, params: Any) -> str | None:
        """The cache key of a request the front may answer, else ``None``."""
        if params is not None and not isinstance(params, dict):
            return None
        if method == "initialize":
            if self._era is not None or params is None:
                return None
            version = params.get("protocolVersion")
            if not isinstance(version, str):
                return None
            self._era = "legacy"
            self._session = _canon([version, params.get("capabilities")])
            return _canon(["initialize", version])
        if method not in LISTINGS:
            return None
        meta = params.get("_meta") if params else None
        if self._era == "legacy":
            return _canon([method, "legacy", self._session, params])
        if self._era is None and isinstance(meta, dict) and PROTOCOL_META in meta:
            return _canon([method, "modern", params])
        return None

    # -- the SDK's side ------------------------------------------------------------------------

    def _write_loop(self) -> None:
        with os.fdopen(self._out_r, "rb") as src:
            for line in src:
                if line == _END:
                    break
                try:
                    forward = self._check(line)
                except Exception:
                    log.exception("front writer")
                    forward = True
                if forward:
                    with self._lock:
                        _write_all(self._real_out, line)

    def _check(self, line: bytes) -> bool:
        """Whether to forward an SDK line; drops (and verifies) duplicates, records misses."""
        with self._lock:
            if not self._sent and not self._record:
                return True
        try:
            msg = json.loads(line)
        except ValueError:
            return True
        if not isinstance(msg, dict) or "id" not in msg or "method" in msg:
            return True
        ident = msg["id"]
        with self._lock:
            sent = self._sent.pop(ident, None)
            key = self._record.pop(ident, None)
        if sent is not None:
            if sent != line and self.cache is not None:
                log.warning("cached MCP answer differs from the SDK's: cache cleared")
                self.cache.clear()
            return False
        idb = _id_bytes(ident)
        if key is not None and idb is not None and self.cache is not None and "result" in msg:
            head = b'{"jsonrpc":"2.0","id":' + idb + b',"result":'
            body = line.rstrip(b"\r\n")
            if body.startswith(head) and body.endswith(b"}"):
                self.cache.put(key, body[len(head) : -1].decode("utf-8"))
        return True


def start(home: str) -> EarlyFront | None:
    """Start the front for a stdio server whose home is ``home`` (``None`` if it cannot be)."""
    try:
        fp = fingerprint(package_dirs())
        cache = AnswerCache(os.path.join(home, "cache", "mcp-early.json"), fp) if fp else None
        front = EarlyFront(cache)
        front.start()
        return front
    except Exception as exc:  # the server works without the front, only slower to start
        log.warning("no early MCP answers: %s: %s", type(exc).__name__, exc)
        return None
