"""Every adapter's module docstring carries a runnable example (the README shows the same ones):
each is extracted and run as written, in a fresh process on a temporary store."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: module file -> a line its example must print (what the example says it shows)
EXAMPLES = {
    "integrations/langchain/__init__.py": "pytest tests/api",
    "integrations/langgraph/__init__.py": "alembic upgrade head && deploy",
    "integrations/llamaindex.py": "Tried: kubectl apply -f app.yaml",
    "integrations/mcp_server.py": "kubectl apply",
    "integrations/google_adk.py": "Tried: pytest tests/api",
    "integrations/openai_agents.py": "['user', 'assistant', 'user', 'assistant']",
    "integrations/pydantic_ai.py": (
        "- worked here instead: `alembic upgrade head && pytest tests/api` — 1 of 1 try, "
        "from 1 source"
    ),
}


def example_of(path: Path) -> str:
    """The indented block after ``Runnable example ...::`` in the module docstring."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    head, sep, rest = doc.partition("::\n")
    assert sep and "Runnable example" in head, f"{path}: no 'Runnable example ...::' block"
    block: list[str] = []
    for line in rest.splitlines():
        if line.strip() and not line.startswith("    "):
            break  # the docstring goes on after the example
        block.append(line)
    return textwrap.dedent("\n".join(block))


def test_the_extractor_stops_at_the_end_of_the_block(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""Doc.\n\nRunnable example::\n\n    x = 1\n\n    print(x)\n\nMore."""\n')
    assert example_of(module).strip() == "x = 1\n\nprint(x)"


@pytest.mark.parametrize("module", sorted(EXAMPLES))
def test_the_docstring_example_runs(module: str, tmp_path: Path) -> None:
    code = example_of(ROOT / module)
    env = {
        **os.environ,
        "MIMIR_EMBEDDER": "hash",
        "MIMIR_HOME": str(tmp_path / "home"),
        "TMPDIR": str(tmp_path),
    }
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, f"{module} example failed:\n{out.stderr[-3000:]}"
    assert EXAMPLES[module] in out.stdout.splitlines(), out.stdout
