"""What a wheel ships: every file of the source tree's packages (modules, templates, static
files, plugin files, model json), found by ``setup.py`` rather than listed by hand, with no
setuptools warning; and the Claude Code plugin's hooks file is the one ``mimir setup claude-code``
would write."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Folder in the wheel -> source folder (as setup.py's ROOTS, with slashes).
ROOTS = {
    "mimir_core": "mimir_core",
    "mimir_integrations": "integrations",
    "mimir_integrations/hermes_plugin": "hermes_plugin",
}
TOP_FILES = ["pyproject.toml", "setup.py", "README.md", "LICENSE", "NOTICE"]


def source_files() -> set[str]:
    """Every file under the package folders, as its path inside the wheel."""
    files = set()
    for name, folder in ROOTS.items():
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.add(f"{name}/{path.relative_to(ROOT / folder).as_posix()}")
    return files


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[set[str], str]:
    """A wheel built from a clean copy of the tree (no ``build/`` left over) and pip's output."""
    src = tmp_path_factory.mktemp("src")
    for name in TOP_FILES:
        shutil.copy2(ROOT / name, src / name)
    for folder in set(ROOTS.values()):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    out_dir = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    done = subprocess.run(
        [*cmd, "--no-index", "-w", str(out_dir), str(src)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out_dir.glob("*.whl")
    with zipfile.ZipFile(built) as zf:
        names = {n for n in zf.namelist() if not n.startswith("mimir_lessons-")}
    return names, done.stdout + done.stderr


def test_the_wheel_ships_every_file_of_the_packages(wheel: tuple[set[str], str]) -> None:
    names, _ = wheel
    assert source_files() - names == set(), "files of the source tree missing from the wheel"
    assert names - source_files() == set(), "files in the wheel that the tree does not have"
    assert "mimir_integrations/ui/templates/base.html" in names  # the check sees data files


def test_building_prints_no_setuptools_banner(wheel: tuple[set[str], str]) -> None:
    _, output = wheel
    assert "would be ignored" not in output and "absent from the `packages`" not in output


def test_setup_finds_every_package_folder() -> None:
    import runpy

    setup = runpy.run_path(str(ROOT / "setup.py"), run_name="not_main")
    assert setup["ROOTS"] == {k.replace("/", "."): v for k, v in ROOTS.items()}
    parents = {Path(f).parent for f in source_files()}
    folders = {".".join(p.parts) for p in parents if not any(s[0] == "." for s in p.parts)}
    assert set(setup["packages"]()) == folders  # a hidden folder is data of its package


def test_the_plugin_hooks_are_setups_hooks() -> None:
    from mimir_integrations.claude_code import hooks_config

    hooks = json.loads((ROOT / "integrations/claude_plugin/hooks/hooks.json").read_text())
    assert hooks["hooks"] == hooks_config("mimir hook claude-code")
