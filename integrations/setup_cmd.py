"""``mimir setup <target>`` and ``mimir uninstall <target>``: wire Mimir into a host in one command.

Targets come from the one list of hosts, :mod:`mimir_integrations.hosts`: a name and the module
that implements it with ``setup(env) -> list[str]`` and ``uninstall(env) -> list[str]`` (lines
saying what was done), both given a :class:`SetupEnv` with the helpers every target needs: JSON
files merged with a backup first, executables written without clobbering the user's own, the
host's CLI run when it is on PATH. Setup is idempotent; uninstall removes only what setup added.
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mimir_core.errors import ConfigError

from .hosts import setup_targets

#: ``mimir setup <name>`` → the module implementing it (``setup(env)``, ``uninstall(env)``), from
#: :data:`mimir_integrations.hosts.HOSTS`.
SETUP_TARGETS: dict[str, str] = setup_targets()


def mimir_executable() -> list[str]:
    """How to run ``mimir`` from a host: this install's console script, else ``python -m``."""
    beside = Path(sys.executable).parent / "mimir"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("mimir")
    if found:
        return [found]
    return [sys.executable, "-m", "mimir_integrations.cli"]


def hook_launcher(core_dir: Path | None = None, integrations_dir: Path | None = None) -> list[str]:
    """How a host runs ``mimir hook``: this interpreter with ``-I -S`` and a one-line bootstrap.

    A hook runs on every tool call, and ``site`` (site-packages, ``.pth`` files, an editable
    install's import finder) costs a bare interpreter about 40 ms of its ~60. ``-S`` skips it;
    ``-I`` keeps the host's working directory (the user's project, maybe with its own ``json.py``)
    and ``PYTHON*`` variables out of the import path;
    the bootstrap puts back only what the hook needs: the directories holding ``mimir_core`` and
    ``mimir_integrations`` (appended, so the standard library still comes first), or, for an
    editable install whose source folder is named differently (``integrations/``), the package
    itself with that folder as its path. Falls back to :func:`mimir_executable` when the packages
    are not plain directories (a zip, a frozen build).
    """
    import mimir_core
    import mimir_integrations

    try:
        core = core_dir or Path(str(mimir_core.__file__)).resolve().parent
        integ = integrations_dir or Path(str(mimir_integrations.__file__)).resolve().parent
        ok = (core / "__init__.py").is_file() and (integ / "hooks.py").is_file()
    except (OSError, TypeError):
        ok = False
    if not ok or core.name != "mimir_core":
        return [*mimir_executable(), "hook"]
    lit = json.dumps  # a Python string literal in double quotes: reads well inside '...'
    roots = [str(core.parent)]
    boot = "import sys"
    if integ.name == "mimir_integrations":
        roots += [str(integ.parent)] if str(integ.parent) not in roots else []
    else:
        boot += (
            ';m=type(sys)("mimir_integrations")'
            f";m.__path__=[{lit(str(integ))}];m.__file__={lit(str(integ / '__init__.py'))}"
            ';sys.modules["mimir_integrations"]=m'
        )
    boot += "".join(f";sys.path.append({lit(r)})" for r in roots)
    boot += ";from mimir_integrations.hooks import main;raise SystemExit(main(sys.argv[2:]))"
    return [sys.executable, "-I", "-S", "-c", boot, "hook"]


class SetupEnv:
    """The user's home, the Mimir home given with ``--home``, and the file helpers."""

    def __init__(self, user_home: Path | None = None, mimir_home: str | None = None) -> None:
        self.user_home = Path(user_home or Path.home())
        self.mimir_home = str(Path(mimir_home).expanduser().resolve()) if mimir_home else None
        self.mimir_home_env = {"MIMIR_HOME": self.mimir_home} if self.mimir_home else {}
        self.stamp = time.strftime("%Y%m%d-%H%M%S")

    def error(self, message: str) -> ConfigError:
        """An error to raise (one line for the user)."""
        return ConfigError(message)

    def command(self, *args: str) -> str:
        """A shell command line running ``mimir <args>`` (with ``--home`` when one was given)."""
        home = ["--home", self.mimir_home] if self.mimir_home else []
        return shlex.join([*mimir_executable(), *args, *home])

    def hook_command(self, host: str) -> str:
        """The shell command a host runs for ``mimir hook <host>`` (see :func:`hook_launcher`);
        it always contains ``hook <host>``, which is how uninstall recognises it."""
        home = ["--home", self.mimir_home] if self.mimir_home else []
        return shlex.join([*hook_launcher(), host, *home])

    def mcp_command(self) -> list[str]:
        """The MCP server's command (its home goes in the environment: see :meth:`env_args`)."""
        return [*mimir_executable(), "mcp"]

    def env_args(self, flag: str) -> list[str]:
        """``[flag, "MIMIR_HOME=..."]`` when a home was given."""
        return [arg for k, v in self.mimir_home_env.items() for arg in (flag, f"{k}={v}")]

    def read_json(self, path: Path) -> dict[str, Any]:
        """A JSON object file ({} when missing); never guesses at a broken one."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise self.error(f"cannot read {path}: {exc}") from exc
        if not text.strip():
            return {}
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise self.error(f"{path} is not valid JSON ({exc}); fix it by hand first") from exc
        if not isinstance(data, dict):
            raise self.error(f"{path} does not hold a JSON object; fix it by hand first")
        return data

    def backup(self, path: Path) -> Path | None:
        """Copy ``path`` to ``<path>.mimir-backup-<time>`` (None when there is nothing to copy)."""
        if not path.exists():
            return None
        dest = path.with_name(f"{path.name}.mimir-backup-{self.stamp}")
        shutil.copy2(path, dest)
        return dest

    def write_json(self, path: Path, data: dict[str, Any], what: str) -> str:
        """Write ``data`` to ``path`` atomically after a backup; unchanged files are left alone."""
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        try:
            if path.read_text(encoding="utf-8") == text:
                return f"{path}: already up to date ({what})"
        except OSError:
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        saved = self.backup(path)
        tmp = path.with_name(f".{path.name}.mimir-tmp")
        tmp.write_text(text, encoding="utf-8")
        if path.exists():
            shutil.copymode(path, tmp)
        os.replace(tmp, path)
        return f"{path}: {what}" + (f" (backup: {saved.name})" if saved else "")

    def write_executable(self, path: Path, body: str, mark: str) -> bool:
        """Write an executable script unless a file that is not ours (no ``mark``) is there."""
        if path.exists():
            current = path.read_text(encoding="utf-8", errors="replace")
            if mark not in current:
                exec_line = body.strip().splitlines()[-1]
                print(
                    f"skipped {path}: a hook of yours is there; add `{exec_line}` to it",
                    file=sys.stderr,
                )
                return False
            if current == body:
                return True
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
        path.chmod(0o755)
        return True

    def remove_file(self, path: Path, mark: str) -> bool:
        """Remove ``path`` if it is ours (contains ``mark``)."""
        try:
            if mark in path.read_text(encoding="utf-8", errors="replace"):
                path.unlink()
                return True
        except OSError:
            pass
        return False

    def run_host_cli(self, exe: str, args: list[str], *, what: str, undo: list[str] | None) -> str:
        """Run the host's CLI if it is on PATH (after ``undo`` so re-running stays idempotent);
        otherwise say so, with the command to run later."""
        found = shutil.which(exe)
        line = shlex.join([exe, *args])
        if found is None:
            return f"{exe} CLI not found on PATH: for {what}, run later: {line}"
        if undo is not None:
            subprocess.run([found, *undo], capture_output=True, text=True, timeout=120)
        out = subprocess.run([found, *args], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            if undo is None:  # removing something that is not there is fine
                return f"{line}: nothing to remove ({out.stderr.strip()[:200]})"
            raise self.error(f"{line} failed: {(out.stderr or out.stdout).strip()[:500]}")
        return f"{what}: {line}"


def target_module(name: str) -> Any:
    """The module implementing a setup target. Raises :class:`ConfigError` for unknown names."""
    if name not in SETUP_TARGETS:
        raise ConfigError(f"target: unknown {name!r}; expected one of {', '.join(SETUP_TARGETS)}")
    return importlib.import_module(SETUP_TARGETS[name])


def run(name: str, *, remove: bool = False, mimir_home: str | None = None) -> list[str]:
    """Set up (or uninstall) a target; returns what was done, one line each."""
    module = target_module(name)
    env = SetupEnv(mimir_home=mimir_home)
    lines: list[str] = (module.uninstall if remove else module.setup)(env)
    return lines
