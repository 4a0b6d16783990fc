"""Dependency rules: the core imports no host framework; light imports stay light."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

HOST_FRAMEWORKS = [
    "langchain",
    "langchain_core",
    "langgraph",
    "llama_index",
    "mcp",
    "anthropic",
    "pydantic_ai",
    "agents",
    "openai",
]


def run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_core_works_with_no_host_framework_installed(tmp_path: object) -> None:
    # Make every host framework unimportable, as in an install without extras.
    out = run(
        f"""
        import sys, importlib.abc, json
        BLOCKED = {HOST_FRAMEWORKS!r}
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split('.')[0] in BLOCKED:
                    raise ImportError('blocked: ' + name)
        sys.meta_path.insert(0, Block())
        from mimir_core import Mimir, Experience, Lesson, Hit, Recommendation, MimirError
        m = Mimir({str(tmp_path)!r}, embedder='hash')
        m.record('run the tests', 'pytest', 'failure', reason='ImportError')
        hits = m.recall('run the tests')
        print(json.dumps({{'hits': len(hits), 'mods': sorted(
            n for n in sys.modules if n.split('.')[0] in BLOCKED)}}))
        """
    )
    data = json.loads(out.strip().splitlines()[-1])
    assert data == {"hits": 1, "mods": []}


def test_hook_path_imports_stay_stdlib_only() -> None:
    out = run(
        """
        import sys, json
        import mimir_core, mimir_core.redact.core, mimir_core.text
        heavy = [m for m in ('lancedb', 'numpy', 'pyarrow', 'fastembed', 'pydantic', 'onnxruntime')
                 if m in sys.modules]
        print(json.dumps(heavy))
        """
    )
    assert json.loads(out.strip()) == []


def test_core_never_imports_an_adapter_package() -> None:
    from pathlib import Path

    core = Path(__file__).resolve().parents[2] / "mimir_core"
    offenders = []
    for path in core.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for name in [*HOST_FRAMEWORKS, "mimir_integrations"]:
            if f"import {name}" in text or f"from {name}" in text:
                offenders.append(f"{path.name}: {name}")
    assert offenders == []
