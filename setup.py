"""Package discovery for the two renamed source folders.

``pyproject.toml``'s ``[tool.setuptools.packages.find]`` cannot give a folder another import name
(``integrations/`` is ``mimir_integrations``, ``hermes_plugin/`` is
``mimir_integrations.hermes_plugin``), so the packages are found here, from :data:`ROOTS`, and
never listed by hand: a new package, or a folder of templates or static files, ships without an
edit. Everything else (metadata, extras, package data) lives in ``pyproject.toml``.
"""

from __future__ import annotations

from setuptools import find_namespace_packages, setup

#: Import name -> source folder.
ROOTS = {
    "mimir_core": "mimir_core",
    "mimir_integrations": "integrations",
    "mimir_integrations.hermes_plugin": "hermes_plugin",
}


def packages() -> list[str]:
    """Every folder under each root, data-only folders included (as namespace packages)."""
    found = []
    for name, folder in ROOTS.items():
        found.append(name)
        subs = find_namespace_packages(folder, exclude=["__pycache__", "*.__pycache__"])
        found += [f"{name}.{sub}" for sub in subs]
    return sorted(found)


if __name__ == "__main__":
    setup(packages=packages(), package_dir=ROOTS)
