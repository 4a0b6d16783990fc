"""Fixtures of the end-to-end tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_hosts import CliHome


@pytest.fixture
def cli_home(tmp_path: Path) -> CliHome:
    """A sandboxed home with the billing project, for a coding-agent CLI's run."""
    return CliHome(tmp_path / "home")
