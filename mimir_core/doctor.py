"""Health checks of an installation and a store (``mimir doctor``)."""

from __future__ import annotations

import importlib.util
import stat
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .memory import Mimir

Check = dict[str, Any]

EXTRAS = {
    "langchain": "langchain_core",
    "langgraph": "langgraph",
    "llamaindex": "llama_index.core",
    "mcp": "mcp",
    "llm": "anthropic",
}


def _run(name: str, fn: Callable[[], str]) -> Check:
    try:
        return {"check": name, "ok": True, "detail": fn()}
    except Exception as exc:  # a check reports, it never raises
        return {"check": name, "ok": False, "detail": f"{type(exc).__name__}: {exc}"}


def run_checks(m: Mimir) -> list[Check]:
    """Every check, in order; each is ``{"check", "ok", "detail"}``."""
    checks: list[Check] = []

    def python() -> str:
        return sys.version.split()[0]

    def home() -> str:
        m._ensure_home()
        mode = stat.S_IMODE(m.home.stat().st_mode)
        if mode & 0o077:
            raise PermissionError(f"{m.home} is mode {mode:o}; run: chmod 700 {m.home}")
        return f"{m.home} (mode {mode:o})"

    def embedder() -> str:
        emb = m.embedder
        start = time.perf_counter()
        vec = emb.embed(["check that the embedding model loads offline"])
        ms = (time.perf_counter() - start) * 1000
        return f"{emb.name}, {vec.shape[1]}-d, loaded and embedded in {ms:.0f} ms (offline)"

    def store() -> str:
        s = m.store
        meta = s.meta()
        return (
            f"{m.store_uri}: schema v{meta.get('schema_version')}, "
            f"embedded with {meta.get('embed_model')}"
        )

    def contents() -> str:
        st = m.stats()
        return f"{st.experiences} experience(s), {sum(st.lessons.values())} lesson(s)"

    def extras() -> str:
        have = [k for k, mod in EXTRAS.items() if _installed(mod)]
        missing = [k for k in EXTRAS if k not in have]
        return (
            f"installed: {', '.join(have) or 'none'}; not installed: {', '.join(missing) or 'none'}"
        )

    for name, fn in [
        ("python", python),
        ("home", home),
        ("embedder", embedder),
        ("store", store),
        ("contents", contents),
        ("extras", extras),
    ]:
        checks.append(_run(name, fn))
    return checks


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
