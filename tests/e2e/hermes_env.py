"""A cached Python environment with the real Hermes Agent and this repository installed.

Hermes pins its own dependencies, so it gets its own venv, built once per (Hermes version,
Mimir's dependencies, Python version) under ``<cache>/hermes-0.19/<key>/`` (the cache of
:mod:`npm_tools`: the real user's ``~/.cache/mimir-ci`` or ``$MIMIR_CI_CACHE``), guarded by a
file lock. Mimir itself is installed the way a user installs it, not editable: from a copy of
the package sources, reinstalled (without dependencies) whenever their content hash changes.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from npm_tools import cache_dir

HERMES_SPEC = "hermes-agent==0.19.*"
ROOT = Path(__file__).resolve().parents[2]
#: What a wheel of this repository is built from.
SOURCES = (
    "pyproject.toml",
    "setup.py",
    "README.md",
    "LICENSE",
    "NOTICE",
    "mimir_core",
    "integrations",
    "hermes_plugin",
)
INSTALL_TIMEOUT = 1800


def _tree_hash(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for top in paths:
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for f in files:
            if "__pycache__" in f.parts or f.suffix == ".pyc":
                continue
            h.update(str(f.relative_to(ROOT)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _dependencies() -> bytes:
    """What decides the environment's packages: Mimir's dependencies and its hermes extra (a
    change elsewhere in ``pyproject.toml`` only reinstalls Mimir itself)."""
    raw = (ROOT / "pyproject.toml").read_bytes()
    try:
        import tomllib
    except ImportError:  # Python 3.10: any change rebuilds
        return raw
    project = tomllib.loads(raw.decode("utf-8")).get("project", {})
    deps = [project.get("dependencies", []), project.get("optional-dependencies", {}).get("hermes")]
    return repr(deps).encode()


def _pip(python: Path, *args: str) -> None:
    out = subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *args],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    if out.returncode != 0:
        raise RuntimeError(
            f"pip install {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        )


def _copy_sources(dest: Path) -> Path:
    src = dest / "mimir-src"
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / name)
    return src


def hermes_venv() -> Path:
    """The venv directory (``bin/hermes``, ``bin/mimir``, ``bin/python``), built on first use."""
    key = hashlib.sha256(
        _dependencies() + HERMES_SPEC.encode() + sys.version.split()[0].encode()
    ).hexdigest()[:12]
    base = cache_dir() / "hermes-0.19"
    root = base / key
    venv = root / "venv"
    python = venv / "bin" / "python"
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        deps = root / ".deps-installed"
        stamp = root / ".mimir-sources"
        want = _tree_hash([ROOT / name for name in SOURCES])
        if not (deps.exists() and python.exists()):
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            with tempfile.TemporaryDirectory() as tmp:
                # Hermes and Mimir's dependencies, resolved together as a user would get them.
                _pip(python, HERMES_SPEC, f"{_copy_sources(Path(tmp))}[hermes]")
            deps.write_text(HERMES_SPEC)
            stamp.write_text(want)
        if not stamp.exists() or stamp.read_text() != want:
            with tempfile.TemporaryDirectory() as tmp:
                _pip(python, "--no-deps", "--force-reinstall", str(_copy_sources(Path(tmp))))
            stamp.write_text(want)
    return venv
