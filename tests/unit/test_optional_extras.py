"""An adapter imported without its extra says which extra to install.

Each case runs in a fresh interpreter whose ``sys.meta_path`` starts with a finder that raises
``ModuleNotFoundError`` for one framework package, as Python does when the package is absent, and
checks that the adapter raises :class:`OptionalDependencyError` naming the extra and the pip
command, not a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mimir_core.errors import OptionalDependencyError
from mimir_core.extras import EXTRAS, requires_extra

ROOT = Path(__file__).resolve().parents[2]

_BLOCKER = """
import json, sys
BLOCKED = {blocked!r}
for _name in list(sys.modules):
    if _name.split(".")[0] == BLOCKED:
        del sys.modules[_name]

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Block())
try:
{code}
except BaseException as exc:
    print(json.dumps({{"type": type(exc).__name__, "message": str(exc),
                      "extra": getattr(exc, "extra", None), "name": exc.name
                      if isinstance(exc, ImportError) else None}}))
else:
    print(json.dumps({{"type": None}}))
"""


def run_blocked(blocked: str, code: str) -> dict[str, object]:
    """Run ``code`` with the top-level package ``blocked`` unimportable; what it raised."""
    script = _BLOCKER.format(blocked=blocked, code=textwrap.indent(textwrap.dedent(code), "    "))
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# (what needs the extra, the extra, a package of the extra to remove, the code that imports it)
CASES = [
    (
        "mimir_integrations.langchain",
        "langchain",
        "langchain",
        "import mimir_integrations.langchain",
    ),
    (
        "mimir_integrations.langchain",
        "langchain",
        "langchain_core",
        "import mimir_integrations.langchain",
    ),
    (
        "mimir_integrations.langchain",
        "langchain-classic",
        "langchain_classic",
        "import mimir_integrations.langchain as lc\nlc.MimirMemory",
    ),
    (
        "mimir_integrations.langchain",
        "langchain-classic",
        "langchain_classic",
        "import mimir_integrations.langchain.classic",
    ),
    (
        "mimir_integrations.langgraph",
        "langgraph",
        "langgraph",
        "import mimir_integrations.langgraph",
    ),
    (
        "mimir_integrations.langgraph",
        "langgraph",
        "langchain_core",
        "import mimir_integrations.langgraph",
    ),
    (
        "mimir_integrations.llamaindex",
        "llamaindex",
        "llama_index",
        "import mimir_integrations.llamaindex",
    ),
    (
        "mimir_integrations.pydantic_ai",
        "pydantic-ai",
        "pydantic_ai",
        "import mimir_integrations.pydantic_ai",
    ),
    (
        "mimir_integrations.openai_agents",
        "openai-agents",
        "agents",
        "import mimir_integrations.openai_agents",
    ),
    (
        "mimir_integrations.google_adk",
        "google-adk",
        "google",
        "import mimir_integrations.google_adk",
    ),
    ("mimir_integrations.mcp_server", "mcp", "mcp", "import mimir_integrations.mcp_server"),
    ("mimir_integrations.mcp_server", "mcp", "anyio", "import mimir_integrations.mcp_server"),
    (
        "mimir_integrations.mcp_http",
        "mcp",
        "mcp",
        "from mimir_integrations.mcp_http import rebinding_guard\nrebinding_guard('127.0.0.1')",
    ),
    ("mimir_integrations.ui", "ui", "starlette", "import mimir_integrations.ui.app"),
    ("mimir_integrations.ui", "ui", "jinja2", "import mimir_integrations.ui.app"),
    (
        "the LLM judge (AnthropicChat)",
        "llm",
        "anthropic",
        "from mimir_core.lessons.judge import AnthropicChat\nAnthropicChat(api_key='k')",
    ),
]


@pytest.mark.parametrize(
    ("who", "extra", "blocked", "code"), CASES, ids=[f"{c[2]}-{c[3][:40]}" for c in CASES]
)
def test_an_adapter_without_its_extra_names_the_extra(
    who: str, extra: str, blocked: str, code: str
) -> None:
    got = run_blocked(blocked, code)
    assert got["type"] == OptionalDependencyError.__name__, got
    assert got["extra"] == extra and got["name"] == blocked
    assert got["message"] == (
        f"{who} needs the {extra!r} extra ({blocked!r} is not installed): "
        f"pip install 'mimir-lessons[{extra}]'"
    )


def test_mimir_mcp_without_the_extra_says_which_extra(tmp_path: Path) -> None:
    code = f"""
        from mimir_integrations.cli_mcp import main
        raise SystemExit(main(["--home", {str(tmp_path)!r}, "--no-background"]))
    """
    script = _BLOCKER.format(blocked="mcp", code=textwrap.indent(textwrap.dedent(code), "    "))
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert "needs the 'mcp' extra ('mcp' is not installed)" in out.stderr, out.stderr
    assert "pip install 'mimir-lessons[mcp]'" in out.stderr
    assert "Traceback" not in out.stderr


def test_every_extra_of_pyproject_is_known_and_every_case_covers_one() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"]) - {"all", "dev"}
    assert set(EXTRAS) == extras
    # every extra that gates an import has a case (hermes gates none: see the test below)
    assert {c[1] for c in CASES} == extras - {"hermes"}
    assert all(c[2] in EXTRAS[c[1]] for c in CASES)


def test_the_hermes_adapter_imports_without_pyyaml() -> None:
    # The hermes extra (PyYAML) only lets ``mimir setup hermes`` check its edit of config.yaml;
    # without it the provider and the set-up still import and the edit is the one-line form.
    got = run_blocked(
        "yaml",
        """
        import mimir_integrations.hermes, mimir_integrations.hermes_setup
        import mimir_integrations.hermes_plugin
        """,
    )
    assert got == {"type": None}


def test_a_missing_module_outside_the_extra_is_not_disguised() -> None:
    with pytest.raises(ModuleNotFoundError) as caught, requires_extra("x", "langgraph"):
        raise ModuleNotFoundError("No module named 'tenacity'", name="tenacity")
    assert not isinstance(caught.value, OptionalDependencyError)


def test_an_unknown_extra_is_a_bug_of_the_caller() -> None:
    with pytest.raises(ValueError, match="unknown extra 'lang-graph'"):
        requires_extra("x", "lang-graph")
