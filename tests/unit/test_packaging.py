"""What a wheel ships: every package of the source tree is listed, so an installed (not
editable) Mimir has every module the editable one has; and the Claude Code plugin's hooks file
is the one ``mimir setup claude-code`` would write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_directory_is_in_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    roots = {name: ROOT / path for name, path in config["package-dir"].items()}
    found = set()
    for name, base in roots.items():
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
                continue
            found.add(".".join([name, *rel.parts]))
    assert found - listed == set(), "packages missing from pyproject.toml"


def test_the_plugin_hooks_are_setups_hooks() -> None:
    from mimir_integrations.claude_code import hooks_config

    hooks = json.loads((ROOT / "integrations/claude_plugin/hooks/hooks.json").read_text())
    assert hooks["hooks"] == hooks_config("mimir hook claude-code")
