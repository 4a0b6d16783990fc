"""The core is layered (issue 29): each job is a package, and the layers keep their rules.

- Only the facade and a few shared leaves sit directly in ``mimir_core/``.
- Only ``store/`` imports lancedb.
- A layer package's ``__init__.py`` imports nothing, so the hook path can import one stdlib-only
  module of a package (``tools/fence.py``, ``ingest/spool.py``) without loading its neighbours.
- ``hosting/`` serves the adapters: no module below it imports it at import time.
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "mimir_core"
#: The facade, the public API's module and the leaves every layer shares.
TOP_LEVEL = {
    "__init__",
    "memory",
    "deps",
    "errors",
    "types",
    "settings",
    "settings_doc",
    "extras",
    "scope",
    "text",
    "testing",
}
LAYERS = {"redact", "store", "embed", "ingest", "search", "lessons", "observations", "tools"}
LAYERS |= {"hosting", "ops"}
EMPTY_INITS = LAYERS - {"lessons", "observations"}


def _imports(path: Path, top_level_only: bool = False) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parts = ["mimir_core", *path.relative_to(CORE).with_suffix("").parts]
    package = parts[:-1]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                found.add(".".join([*base, node.module] if node.module else base))
            else:
                found.add(node.module or "")
    return found


def test_only_the_facade_and_shared_leaves_sit_at_the_top() -> None:
    modules = {p.stem for p in CORE.glob("*.py")}
    assert modules == TOP_LEVEL, sorted(modules ^ TOP_LEVEL)
    packages = {p.name for p in CORE.iterdir() if (p / "__init__.py").is_file()}
    assert packages == LAYERS, sorted(packages ^ LAYERS)


def test_only_the_store_imports_lancedb() -> None:
    offenders = [
        str(path.relative_to(CORE))
        for path in CORE.rglob("*.py")
        if path.parent.name != "store"
        and any(name.split(".")[0] == "lancedb" for name in _imports(path))
    ]
    assert offenders == []


def test_layer_packages_import_nothing_on_their_own() -> None:
    for name in sorted(EMPTY_INITS):
        tree = ast.parse((CORE / name / "__init__.py").read_text(encoding="utf-8"))
        body = [n for n in tree.body if not isinstance(n, ast.Expr)]  # a docstring only
        assert body == [], f"mimir_core/{name}/__init__.py holds code"


def test_nothing_below_hosting_imports_it_at_import_time() -> None:
    offenders = [
        str(path.relative_to(CORE))
        for path in CORE.rglob("*.py")
        if path.parent.name != "hosting"
        and any(n.startswith("mimir_core.hosting") for n in _imports(path, top_level_only=True))
    ]
    assert offenders == []
