"""``mimir setup hermes`` / ``mimir uninstall hermes``: the plugin folder and one config line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mimir_core.errors import ConfigError
from mimir_integrations.hermes_setup import current_provider, set_provider
from mimir_integrations.setup_cmd import SetupEnv

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """\
# my Hermes settings
model:
  provider: custom
  default: qwen3   # local model

memory:
  memory_enabled: true   # keep MEMORY.md
  provider: honcho  # the cloud one
  honcho:
    provider: nested-not-this-one

toolsets: [hermes-cli]
"""


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("", "memory:\n  provider: mimir\n"),
        ("model:\n  default: x", "model:\n  default: x\nmemory:\n  provider: mimir\n"),
        (
            "memory:\n  memory_enabled: true\n",
            "memory:\n  provider: mimir\n  memory_enabled: true\n",
        ),
        ("memory:\n    provider: ''\n", "memory:\n    provider: mimir\n"),
        ("memory:  # c\n  provider: honcho # why\n", "memory:  # c\n  provider: mimir # why\n"),
        ("memory:\n", "memory:\n  provider: mimir\n"),
        ("memory:\r\n  provider: x\r\n", "memory:\r\n  provider: mimir\r\n"),
    ],
)
def test_setting_the_provider_changes_one_line(before: str, after: str) -> None:
    assert set_provider(before, "mimir") == after


def test_everything_else_stays_byte_for_byte() -> None:
    new = set_provider(CONFIG, "mimir")
    assert new == CONFIG.replace(
        "provider: honcho  # the cloud one", "provider: mimir  # the cloud one"
    )
    assert current_provider(new) == "mimir"
    data = yaml.safe_load(new)
    assert data["memory"]["honcho"]["provider"] == "nested-not-this-one"
    back = set_provider(new, "honcho")
    assert back == CONFIG


def test_removing_the_provider_removes_an_empty_memory_block() -> None:
    assert set_provider("model: {}\nmemory:\n  provider: mimir\n", None) == "model: {}\n"
    assert set_provider("memory:\n  provider: mimir\n  x: 1\n", None) == "memory:\n  x: 1\n"
    assert set_provider("model: {}\n", None) == "model: {}\n"


def test_values_that_need_quotes_are_quoted() -> None:
    new = set_provider("memory:\n  provider: x\n", "")
    assert new == 'memory:\n  provider: ""\n' and current_provider(new) == ""
    assert current_provider(set_provider("", "a b: c")) == "a b: c"


@pytest.mark.parametrize(
    "config",
    ["memory: {provider: honcho}\n", "memory: null\n", "model: [unclosed\n"],
)
def test_configs_it_cannot_edit_safely_are_refused(config: str) -> None:
    with pytest.raises(ConfigError, match=r"config\.yaml"):
        set_provider(config, "mimir")


def run_cli(*args: str, hermes_home: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"HERMES_HOME": str(hermes_home), "HOME": str(home), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "mimir_integrations.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )


def test_setup_and_uninstall_round_trip_through_the_cli(tmp_path: Path) -> None:
    hermes_home = tmp_path / "hermes"
    hermes_home.mkdir()
    config = hermes_home / "config.yaml"
    config.write_text(CONFIG)
    out = run_cli("setup", "hermes", hermes_home=hermes_home, home=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "memory.provider: mimir (was honcho)" in out.stdout
    assert "hermes not found on PATH" in out.stdout  # said, not fatal
    folder = hermes_home / "plugins" / "mimir"
    shim = (folder / "__init__.py").read_text()
    assert "MemoryProvider" in shim[:8192]  # how Hermes 0.19 recognises a provider folder
    assert (ROOT / "hermes_plugin" / "__init__.py").read_text() == shim
    assert {p.name for p in folder.iterdir()} == {
        "__init__.py", "plugin.yaml", "README.md", "mimir.json"
    }  # fmt: skip
    assert json.loads((folder / "mimir.json").read_text()) == {"previous_provider": "honcho"}
    backups = list(hermes_home.glob("config.yaml.mimir-backup-*"))
    assert len(backups) == 1 and backups[0].read_text() == CONFIG

    again = run_cli("setup", "hermes", hermes_home=hermes_home, home=tmp_path)
    assert "already mimir" in again.stdout
    assert json.loads((folder / "mimir.json").read_text()) == {"previous_provider": "honcho"}

    out = run_cli("uninstall", "hermes", hermes_home=hermes_home, home=tmp_path)
    assert out.returncode == 0, out.stderr
    assert config.read_text() == CONFIG
    assert not folder.exists()
    assert "memory data kept" in out.stdout


def test_setup_on_a_clean_hermes_home_and_with_a_chosen_mimir_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mimir_integrations import hermes_setup

    hermes_home = tmp_path / "fresh"
    monkeypatch.setenv("HERMES_HOME", str(hermes_home))
    env = SetupEnv(user_home=tmp_path, mimir_home=str(tmp_path / "mem"))
    lines = hermes_setup.setup(env)
    assert (hermes_home / "config.yaml").read_text() == "memory:\n  provider: mimir\n"
    state = json.loads((hermes_home / "plugins" / "mimir" / "mimir.json").read_text())
    assert state == {
        "previous_provider": None,
        "created_config": True,
        "home": str((tmp_path / "mem").resolve()),
    }
    assert any("memory is stored in" in line and "mem" in line for line in lines)
    hermes_setup.setup(env)  # a re-run remembers that the config was created by setup
    hermes_setup.uninstall(env)
    assert not (hermes_home / "config.yaml").exists()
    assert not (hermes_home / "plugins" / "mimir").exists()


def test_a_foreign_plugin_folder_is_never_overwritten(tmp_path: Path) -> None:
    hermes_home = tmp_path / "hermes"
    folder = hermes_home / "plugins" / "mimir"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("# somebody else's plugin\n")
    out = run_cli("setup", "hermes", hermes_home=hermes_home, home=tmp_path)
    assert out.returncode == 1 and "not Mimir's plugin" in out.stderr
    assert (folder / "__init__.py").read_text() == "# somebody else's plugin\n"
    out = run_cli("uninstall", "hermes", hermes_home=hermes_home, home=tmp_path)
    assert out.returncode == 0 and (folder / "__init__.py").exists()


def test_uninstall_leaves_a_provider_the_user_changed_since(tmp_path: Path) -> None:
    hermes_home = tmp_path / "hermes"
    hermes_home.mkdir()
    (hermes_home / "config.yaml").write_text(CONFIG)
    assert run_cli("setup", "hermes", hermes_home=hermes_home, home=tmp_path).returncode == 0
    changed = CONFIG.replace("honcho  #", "mem0  #")
    (hermes_home / "config.yaml").write_text(changed)
    out = run_cli("uninstall", "hermes", hermes_home=hermes_home, home=tmp_path)
    assert "left as it is" in out.stdout
    assert (hermes_home / "config.yaml").read_text() == changed
