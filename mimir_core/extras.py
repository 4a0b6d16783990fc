"""The optional extras: which import names each provides, and the one guard adapters use.

An adapter imports its framework inside :func:`requires_extra`, so a user without the extra gets
:class:`~mimir_core.errors.OptionalDependencyError` naming the extra and the pip command instead of
a bare ``ModuleNotFoundError``. Stdlib-only, so any module (even the hook path) may import it.
"""

from __future__ import annotations

from types import TracebackType

from .errors import OptionalDependencyError

#: The top-level import names each extra of ``pyproject.toml`` installs (directly or through its
#: requirements); a missing module outside these is a real bug and is not disguised.
EXTRAS: dict[str, tuple[str, ...]] = {
    "langchain": ("langchain", "langchain_core"),
    "langchain-classic": ("langchain_classic",),
    "langgraph": ("langgraph", "langchain_core"),
    "llamaindex": ("llama_index",),
    "mcp": ("mcp", "mcp_types", "anyio", "uvicorn"),
    "hermes": ("yaml",),
    "pydantic-ai": ("pydantic_ai",),
    "openai-agents": ("agents",),
    "google-adk": ("google",),
    "llm": ("anthropic",),
    "ui": ("starlette", "jinja2", "markupsafe", "uvicorn", "multipart"),
}


class _ExtraGuard:
    """Turns a ``ModuleNotFoundError`` for one of the extra's packages into the clear error."""

    def __init__(self, module: str, extra: str) -> None:
        if extra not in EXTRAS:
            raise ValueError(f"unknown extra {extra!r}; known: {sorted(EXTRAS)}")
        self.module = module
        self.extra = extra

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        typ: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, ModuleNotFoundError):
            missing = (exc.name or "").partition(".")[0]
            if missing in EXTRAS[self.extra]:
                raise OptionalDependencyError(self.module, self.extra, missing) from exc


def requires_extra(module: str, extra: str) -> _ExtraGuard:
    """Imports in this block come from ``extra``; ``module`` is who needs them (for the message).

    Usage: ``with requires_extra("mimir_integrations.langgraph", "langgraph"):`` around the
    adapter's framework imports.
    """
    return _ExtraGuard(module, extra)
