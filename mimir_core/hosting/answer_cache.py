"""Answers remembered across processes, valid for one fingerprint of the code that made them.

A server whose first answers depend only on its own code and the request (a protocol handshake,
a tool listing) can give them at once on the next start, from this file, instead of making the
client wait while its libraries import. The fingerprint (:func:`files_fingerprint`) is the size
and mtime of the files that shape the answers: an upgrade in place invalidates the cache.

Stdlib-only and cheap to import: it runs before the heavy imports it saves.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..ingest.spool import replace_file

log = logging.getLogger("mimir.cache")

CACHE_VERSION = 1


def files_fingerprint(bases: Mapping[str, str], files: Iterable[tuple[str, ...]]) -> str | None:
    """Python, and the size and mtime of ``files`` (each a package name, then the path inside
    the package's folder in ``bases``). ``None`` when a package or file cannot be found."""
    parts = [sys.version, sys.executable]
    for pkg, *rest in files:
        base = bases.get(pkg)
        if base is None:
            return None
        try:
            st = os.stat(os.path.join(base, *rest))
        except OSError:
            return None
        parts.append(f"{pkg}/{'/'.join(rest)}:{st.st_size}:{st.st_mtime_ns}")
    return "\n".join(parts)


class AnswerCache:
    """Answers (text) by request key, kept in the JSON file ``path`` for one fingerprint ``fp``;
    a file made for another fingerprint, or unreadable, starts empty. Thread-safe."""

    def __init__(self, path: str, fp: str) -> None:
        self.path = path
        self.fp = fp
        self.entries: dict[str, str] = {}
        self._lock = threading.Lock()
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
            if data.get("version") == CACHE_VERSION and data.get("fingerprint") == fp:
                self.entries = {str(k): str(v) for k, v in data["entries"].items()}
        except (OSError, ValueError, AttributeError, KeyError, TypeError):
            pass  # no cache yet, or a damaged one: it is only rebuilt

    def get(self, key: str) -> str | None:
        with self._lock:
            return self.entries.get(key)

    def clear(self) -> None:
        """Forget every answer (one of them proved stale)."""
        with self._lock:
            self.entries = {}
        self._save()

    def put(self, key: str, result: str) -> None:
        """Store one answer and rewrite the file atomically."""
        with self._lock:
            if self.entries.get(key) == result:
                return
            self.entries[key] = result
        self._save()

    def _save(self) -> None:
        with self._lock:
            body = {"version": CACHE_VERSION, "fingerprint": self.fp, "entries": self.entries}
            text = json.dumps(body, ensure_ascii=False)
        try:
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            replace_file(Path(self.path), text.encode("utf-8"), durable=False)
        except OSError as exc:
            log.warning("cannot write %s: %s", self.path, exc)
