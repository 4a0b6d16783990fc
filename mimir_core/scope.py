"""Project scope: the key that ties experiences and lessons to the repository they came from."""

from __future__ import annotations

import os
from pathlib import Path

_MARKERS = (".git", ".hg", ".svn", "pyproject.toml", "package.json", "Cargo.toml", "go.mod")


def project_root(path: str | os.PathLike[str]) -> Path:
    """The nearest ancestor of ``path`` that looks like a project root (else ``path``)."""
    start = Path(path).expanduser().resolve()
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    for candidate in (start, *start.parents):
        if any((candidate / m).exists() for m in _MARKERS[1:]):
            return candidate
    return start


def scope_for(path: str | os.PathLike[str]) -> str:
    """The scope key of the project containing ``path`` (its root directory, as a string)."""
    return str(project_root(path))
