"""``mimir setup hermes`` / ``mimir uninstall hermes``: Mimir as Hermes Agent's memory provider.

Setup installs the plugin folder (``hermes_plugin/``: a shim importing
:class:`mimir_integrations.hermes.MimirMemoryProvider`) into ``$HERMES_HOME/plugins/mimir/`` and
sets ``memory.provider: mimir`` in ``$HERMES_HOME/config.yaml`` (``HERMES_HOME`` defaults to
``~/.hermes``). The config is edited as text, one line, after a backup: comments, order and every
other key stay byte for byte, and the result is checked by parsing both versions. The previous
provider is remembered in the plugin folder, and uninstall puts it back and removes the folder.
Mimir's data (``<hermes_home>/mimir`` unless ``--home``/``MIMIR_HOME`` say otherwise) is kept.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mimir_core.errors import ConfigError

if TYPE_CHECKING:
    from .setup_cmd import SetupEnv

PROVIDER = "mimir"
MARK = "mimir-lessons: hermes plugin"
PLUGIN_FILES = ("__init__.py", "plugin.yaml", "README.md")
STATE = "mimir.json"
_MEMORY = re.compile(r"^memory\s*:")
_MEMORY_BLOCK = re.compile(r"^memory\s*:\s*(#.*)?$")
_PROVIDER = re.compile(r"^(?P<head>\s+provider\s*:)(?P<value>[^#\r\n]*?)(?P<tail>\s+#[^\r\n]*)?$")


def hermes_home(env: SetupEnv) -> Path:
    """``$HERMES_HOME``, else ``~/.hermes``."""
    value = os.environ.get("HERMES_HOME")
    return Path(value).expanduser() if value else env.user_home / ".hermes"


# -- config.yaml as text -------------------------------------------------------------------------


def _scalar(value: str) -> str:
    return value if re.fullmatch(r"[A-Za-z0-9_.-]+", value) else json.dumps(value)


def _memory_block(lines: list[str]) -> tuple[int | None, int | None, int | None, list[int]]:
    """(index of ``memory:``, child indent, index of its ``provider:`` line, child lines)."""
    start = next((i for i, line in enumerate(lines) if _MEMORY.match(line)), None)
    if start is None:
        return None, None, None, []
    if not _MEMORY_BLOCK.match(lines[start].rstrip("\r\n")):
        raise ConfigError(
            "config.yaml: `memory:` is written inline; set the provider with "
            "`hermes config set memory.provider mimir` instead"
        )
    indent: int | None = None
    provider: int | None = None
    children: list[int] = []
    for i in range(start + 1, len(lines)):
        text = lines[i].rstrip("\r\n")
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        depth = len(text) - len(text.lstrip(" "))
        if depth == 0:
            break
        indent = depth if indent is None else indent
        children.append(i)
        if depth == indent and _PROVIDER.match(text):
            provider = i
    return start, indent, provider, children


def current_provider(text: str) -> str | None:
    """The ``memory.provider`` value of a config (None when unset)."""
    data = _load(text)
    if data is _NO_PARSER:  # pragma: no cover - the hermes extra installs PyYAML
        m = next((_PROVIDER.match(ln) for ln in text.splitlines() if _PROVIDER.match(ln)), None)
        return m.group("value").strip().strip("'\"") if m else None
    memory = data.get("memory") if isinstance(data, dict) else None
    value = memory.get("provider") if isinstance(memory, dict) else None
    return None if value is None else str(value)


def set_provider(text: str, value: str | None) -> str:
    """``text`` with ``memory.provider`` set to ``value`` (``None`` removes it), changing only
    that line (and an empty ``memory:`` left behind). Raises :class:`ConfigError` when the file
    cannot be edited safely."""
    lines = text.splitlines(keepends=True)
    nl = "\r\n" if "\r\n" in text else "\n"
    start, indent, provider, children = _memory_block(lines)
    if start is None:
        if value is None:
            return text
        sep = nl if text and not text.endswith("\n") else ""
        new = f"{text}{sep}memory:{nl}  provider: {_scalar(value)}{nl}"
    elif provider is not None:
        line = lines[provider]
        ending = line[len(line.rstrip("\r\n")) :]
        m = _PROVIDER.match(line.rstrip("\r\n"))
        assert m is not None
        if value is None:
            del lines[provider]
            if children == [provider]:  # nothing else under memory: drop the empty block too
                del lines[start]
        else:
            tail = m.group("tail") or ""
            lines[provider] = f"{m.group('head')} {_scalar(value)}{tail}{ending or nl}"
        new = "".join(lines)
    else:
        if value is None:
            return text
        lines.insert(start + 1, f"{' ' * (indent or 2)}provider: {_scalar(value)}{nl}")
        new = "".join(lines)
    _check(text, new, value)
    return new


_NO_PARSER = object()


def _load(text: str) -> Any:
    """The parsed config ({} for an empty file; ``_NO_PARSER`` without PyYAML)."""
    try:
        import yaml
    except ImportError:  # pragma: no cover - the hermes extra installs PyYAML
        return _NO_PARSER
    try:
        data = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config.yaml is not valid YAML ({exc}); fix it by hand first") from exc
    return {} if data is None else data


def _check(before_text: str, after_text: str, value: str | None) -> None:
    """The edited config must parse to the old one with only ``memory.provider`` changed."""
    before, after = _load(before_text), _load(after_text)
    if before is _NO_PARSER:
        return  # no YAML parser here: the one-line edit is all we can do
    expected = copy.deepcopy(before) if isinstance(before, dict) else {}
    memory = expected.get("memory")
    memory = dict(memory) if isinstance(memory, dict) else {}
    if value is None:
        memory.pop("provider", None)
        if memory:
            expected["memory"] = memory
        else:  # the empty ``memory:`` block went too
            expected.pop("memory", None)
    else:
        memory["provider"] = value
        expected["memory"] = memory
    if after != expected:
        raise ConfigError(
            "config.yaml: could not change memory.provider without touching anything else; "
            "set it by hand: hermes config set memory.provider "
            + (value if value is not None else "''")
        )


def _write(env: SetupEnv, path: Path, text: str) -> str:
    saved = env.backup(path)
    tmp = path.with_name(f".{path.name}.mimir-tmp")
    tmp.write_text(text, encoding="utf-8")
    if path.exists():
        shutil.copymode(path, tmp)
    else:
        tmp.chmod(0o600)
    os.replace(tmp, path)
    return f" (backup: {saved.name})" if saved else ""


# -- the plugin folder ---------------------------------------------------------------------------


def _ours(folder: Path) -> bool:
    try:
        return MARK in (folder / "__init__.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def _read_state(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _hermes_python_check() -> str:
    """Whether the Python that runs ``hermes`` can import the provider (one line)."""
    exe = shutil.which("hermes")
    if exe is None:
        return "hermes not found on PATH: install Mimir into Hermes' Python environment too"
    try:
        first = Path(exe).read_bytes()[:300].split(b"\n", 1)[0].decode("utf-8", "replace")
    except OSError:
        first = ""
    parts = first[2:].split() if first.startswith("#!") else []
    if parts and Path(parts[0]).name == "env":
        parts = parts[1:]
    python = shutil.which(parts[0]) if parts else None
    if python is None:
        return f"could not tell which Python runs {exe}; make sure mimir-lessons is installed there"
    probe = subprocess.run(
        [python, "-c", "import mimir_integrations.hermes"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.returncode == 0:
        return f"Hermes' Python ({python}) can load the provider"
    return (
        f"Hermes runs on {python}, which cannot import Mimir; install it there: "
        f"{python} -m pip install 'mimir-lessons[hermes]'"
    )


def setup(env: SetupEnv) -> list[str]:
    """Install the plugin folder and select it in ``config.yaml`` (idempotent)."""
    home = hermes_home(env)
    folder = home / "plugins" / PROVIDER
    if folder.exists() and any(folder.iterdir()) and not _ours(folder):
        raise env.error(f"{folder} exists and is not Mimir's plugin; move it away first")
    config = home / "config.yaml"
    text = config.read_text(encoding="utf-8") if config.exists() else ""
    previous = current_provider(text) if text else None
    state_before = _read_state(folder)
    if "previous_provider" in state_before:  # a re-run: keep what was there before setup
        previous = state_before["previous_provider"]
    folder.mkdir(parents=True, exist_ok=True)
    source = resources.files("mimir_integrations.hermes_plugin")
    for name in PLUGIN_FILES:
        (folder / name).write_bytes(source.joinpath(name).read_bytes())
    state: dict[str, Any] = {"previous_provider": previous if previous != PROVIDER else None}
    if not config.exists() or state_before.get("created_config"):
        state["created_config"] = True
    if env.mimir_home:
        state["home"] = env.mimir_home
    (folder / STATE).write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    lines = [f"{folder}: installed the Mimir memory-provider plugin"]
    if current_provider(text) == PROVIDER and text:
        lines.append(f"{config}: memory.provider is already mimir")
    else:
        config.parent.mkdir(parents=True, exist_ok=True)
        backup = _write(env, config, set_provider(text, PROVIDER))
        was = f" (was {previous})" if previous else ""
        lines.append(f"{config}: memory.provider: mimir{was}{backup}")
    data = env.mimir_home or os.environ.get("MIMIR_HOME") or str(home / "mimir")
    lines.append(f"memory is stored in {data}")
    lines.append(_hermes_python_check())
    return lines


def uninstall(env: SetupEnv) -> list[str]:
    """Put the previous provider back and remove the plugin folder; the data is kept."""
    home = hermes_home(env)
    folder = home / "plugins" / PROVIDER
    config = home / "config.yaml"
    lines: list[str] = []
    state = _read_state(folder)
    text = config.read_text(encoding="utf-8") if config.exists() else ""
    if text and current_provider(text) == PROVIDER:
        previous = state.get("previous_provider")
        previous = previous if isinstance(previous, str) else None
        restored = set_provider(text, previous)
        if not restored.strip() and state.get("created_config"):
            saved = env.backup(config)
            config.unlink()  # setup created it for this one line
            lines.append(f"{config}: removed (setup had created it; backup: {saved})")
        else:
            backup = _write(env, config, restored)
            now = (
                f"memory.provider: {previous}"
                if previous is not None
                else "memory.provider removed"
            )
            lines.append(f"{config}: {now}{backup}")
    else:
        lines.append(f"{config}: memory.provider is not mimir; left as it is")
    if folder.exists() and _ours(folder):
        for name in (*PLUGIN_FILES, STATE):
            (folder / name).unlink(missing_ok=True)
        shutil.rmtree(folder / "__pycache__", ignore_errors=True)
        try:
            folder.rmdir()
            lines.append(f"{folder}: removed")
        except OSError:
            lines.append(f"{folder}: removed Mimir's files (other files are left)")
    else:
        lines.append(f"{folder}: no Mimir plugin there")
    data = state.get("home") or os.environ.get("MIMIR_HOME") or str(home / "mimir")
    lines.append(f"memory data kept in {data} (delete it to forget everything)")
    return lines
