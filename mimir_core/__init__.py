"""Mimir: experience-driven memory for agents.

Agents forget what worked and repeat what failed. Mimir records what an agent tried and how it
turned out, recalls the relevant past attempts, and recommends the best-supported action with an
honest confidence::

    from mimir_core import Mimir
    m = Mimir()                                   # ~/.mimir, or MIMIR_HOME
    m.record_failure("run the API tests", "pytest tests/api", "relation 'orders' does not exist")
    m.record("run the API tests", "alembic upgrade head && pytest tests/api", "success")
    m.recommend("execute the api test-suite")     # -> Recommendation(action='alembic ...', ...)

Public names: :class:`Mimir`, :class:`Experience`, :class:`Lesson`, :class:`Hit`,
:class:`Recommendation`, :class:`MimirError`; backups: :func:`export_store`,
:func:`import_store`, :func:`import_mimir_learn` and :class:`BackupError`. They load lazily so
that light processes (hooks) can import submodules such as :mod:`mimir_core.redact.core` without
pulling in LanceDB or pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "BackupError",
    "Experience",
    "Hit",
    "Lesson",
    "Mimir",
    "MimirError",
    "Recommendation",
    "__version__",
    "export_store",
    "import_mimir_learn",
    "import_store",
]

_LAZY = {
    "Mimir": "mimir_core.memory",
    "Experience": "mimir_core.types",
    "Lesson": "mimir_core.types",
    "Hit": "mimir_core.types",
    "Recommendation": "mimir_core.types",
    "MimirError": "mimir_core.errors",
    "BackupError": "mimir_core.errors",
    "export_store": "mimir_core.ops.backup",
    "import_store": "mimir_core.ops.backup",
    "import_mimir_learn": "mimir_core.ops.import_mimir_learn",
}

if TYPE_CHECKING:
    from .errors import BackupError, MimirError
    from .memory import Mimir
    from .ops.backup import export_store, import_store
    from .ops.import_mimir_learn import import_mimir_learn
    from .types import Experience, Hit, Lesson, Recommendation


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mimir_core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
