"""The one error family of Mimir's public API.

Every error a caller can act on is a :class:`MimirError`. Subclasses say what kind of problem it
is; the message always names the bad value or field so that one line is enough to fix the call.
"""

from __future__ import annotations


class MimirError(Exception):
    """Base class of every error Mimir raises on purpose."""


class InvalidInputError(MimirError, ValueError):
    """An argument or record field is missing, of the wrong type or out of range.

    ``field`` names the offending field (``"outcome"``, ``"score"``, ...); ``value`` holds the value
    that was rejected (shortened for display).
    """

    def __init__(self, field: str, message: str, value: object = None) -> None:
        self.field = field
        self.value = value
        super().__init__(f"{field}: {message}")


class NotFoundError(MimirError, KeyError):
    """No experience or lesson has the given id."""

    def __init__(self, kind: str, ident: str) -> None:
        self.kind = kind
        self.ident = ident
        super().__init__(f"no {kind} with id {ident!r}")

    def __str__(self) -> str:  # KeyError would quote the whole message again
        return str(self.args[0])


class StoreError(MimirError):
    """The store cannot be opened, read or written (permissions, disk, corruption)."""


class SchemaVersionError(StoreError):
    """The store was written by a newer Mimir whose schema this version does not know."""


class EmbedderMismatchError(StoreError):
    """The store's vectors come from another embedding model than the active one."""


class BackupError(MimirError):
    """An export file cannot be written, or an import file is unreadable, truncated, corrupt or
    of a newer format; the message names the file and the line."""


class EmbedderUnavailableError(MimirError):
    """The configured embedder cannot be loaded (missing package or model files)."""


class ConfigError(MimirError):
    """A setting has an invalid value."""


class SigningKeyError(MimirError):
    """The lessons' signing key is missing, malformed, or not the key that signed them; the
    message names the key file and what to do."""


class OptionalDependencyError(MimirError, ImportError):
    """A module needs an extra that is not installed; the message names the extra and the pip
    command. Raised by :func:`mimir_core.extras.requires_extra`.

    ``module`` is who needs it (``"mimir_integrations.langgraph"``), ``extra`` the extra's name
    and ``missing`` the import name that was not found (also ``ImportError.name``).
    """

    def __init__(self, module: str, extra: str, missing: str | None = None) -> None:
        self.module = module
        self.extra = extra
        self.missing = missing
        detail = f" ({missing!r} is not installed)" if missing else ""
        super().__init__(
            f"{module} needs the {extra!r} extra{detail}: pip install 'mimir-lessons[{extra}]'",
            name=missing,
        )


def short(value: object, limit: int = 80) -> str:
    """A value shortened for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
