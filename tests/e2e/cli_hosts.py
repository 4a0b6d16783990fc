"""What the coding-agent CLI end-to-end tests (Codex, Gemini, Copilot) share: a sandboxed home
with a small billing project whose ``make deploy-staging`` fails and whose deploy script works,
``mimir`` run as the user would, and the checks every host's run ends with. The fixture that
builds one is ``cli_home`` in this folder's ``conftest.py``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
FAILING = "make deploy-staging"
WORKING = "./scripts/deploy.sh staging billing"
MAKE_ERROR = "No rule to make target"


class CliHome:
    """A sandboxed ``home`` holding the ``billing`` git project (see the module doc)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.project = home / "billing"
        (self.project / ".git").mkdir(parents=True)
        (self.project / "Makefile").write_text("test:\n\t@echo tests pass\n")
        deploy = self.project / "scripts" / "deploy.sh"
        deploy.parent.mkdir()
        deploy.write_text('#!/bin/sh\necho "deployed $2 to $1"\n')
        deploy.chmod(0o755)

    def mimir(self, env: dict[str, str], *args: str) -> str:
        """``mimir ARGS`` in ``env``; its stdout (it must succeed)."""
        out = subprocess.run(
            [str(BIN / "mimir"), *args], env=env, capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    def assert_hooks_quiet(self) -> None:
        """No hook logged an error."""
        log = self.home / ".mimir" / "logs" / "hooks.log"
        assert not log.exists(), log.read_text()[-3000:]

    def captured_failure(self, source: str) -> Any:
        """The failed ``make`` as ``source``'s hooks recorded it (ingested from the spool), in
        the project's scope."""
        from mimir_core import Mimir

        m = Mimir(self.home / ".mimir", embedder="hash")
        try:
            assert m.ingest().ingested >= 1
            hits = m.recall("deploy billing", outcome="failure", scope="*")
            exp = next(h.experience for h in hits if h.experience.source == source)
        finally:
            m.close()
        assert exp.action == FAILING
        assert exp.scope == str(self.project.resolve())
        return exp
