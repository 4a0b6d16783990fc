"""docs/configuration.md cannot drift: its table is generated from the settings class, and every
``MIMIR_*`` variable the code reads is on the page."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from mimir_core import settings_doc
from mimir_core.settings import MimirSettings

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"

#: variables read by test seams only, not by users
TEST_ONLY = {"MIMIR_CRASH_AT"}


def test_the_page_matches_the_settings_class() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert settings_doc.updated_page(text) == text, (
        f"docs/configuration.md is stale: run `{settings_doc.COMMAND}`"
    )


def test_every_setting_is_a_row_with_its_description() -> None:
    block = settings_doc.render_block()
    for name, field in MimirSettings.model_fields.items():
        row = next(r for r in block.splitlines() if r.startswith(f"| `MIMIR_{name.upper()}` |"))
        assert field.description and settings_doc.markdown_text(field.description) in row


def test_a_setting_without_a_docstring_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Bare(MimirSettings):
        undocumented: int = 3

    monkeypatch.setattr(settings_doc, "MimirSettings", Bare)
    with pytest.raises(ValueError, match="undocumented has no docstring"):
        settings_doc.render_block()


def test_defaults_do_not_depend_on_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    block = settings_doc.render_block()
    monkeypatch.setenv("HOME", "/somewhere/else")
    assert settings_doc.render_block() == block
    assert "| `MIMIR_HOME` | path | `~/.mimir` |" in block


def test_check_names_the_command_when_stale(tmp_path: Path) -> None:
    page = tmp_path / "configuration.md"
    page.write_text(f"intro\n{settings_doc.BEGIN}\nold\n{settings_doc.END}\noutro\n")
    cmd = [sys.executable, "-m", "mimir_core.settings_doc", "--check", "--page", str(page)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and settings_doc.COMMAND in out.stderr
    write = [*cmd[:3], "--write", "--page", str(page)]
    assert subprocess.run(write, timeout=60).returncode == 0
    text = page.read_text()
    assert text.startswith("intro\n") and text.endswith("\noutro\n") and "MIMIR_HOME" in text
    assert subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0


def test_a_page_without_markers_is_an_error() -> None:
    with pytest.raises(ValueError, match="no generated block"):
        settings_doc.updated_page("# Configuration\n")


def test_every_variable_the_code_reads_is_documented() -> None:
    text = PAGE.read_text(encoding="utf-8")
    read: set[str] = set()
    for package in ("mimir_core", "integrations"):
        for path in (ROOT / package).rglob("*.py"):
            read |= set(re.findall(r"[\"'](MIMIR_[A-Z0-9_]+)[\"']", path.read_text("utf-8")))
    assert len(read) >= 10, read  # the scan finds the names
    missing = sorted(v for v in read - TEST_ONLY if f"`{v}`" not in text)
    assert not missing, f"read by the code but not in docs/configuration.md: {missing}"
