"""The one list of hosts: every place that names a host (the CLI's choices, the hook's usage text,
the setup targets, the hook dispatcher) is derived from ``mimir_integrations.hosts.HOSTS``."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mimir_integrations import hooks, setup_cmd
from mimir_integrations.cli import build_parser
from mimir_integrations.hosts import HOSTS, host

ROOT = Path(__file__).resolve().parents[2]


def choices(parser: Any, command: str) -> list[str]:
    """The choices of the positional argument of ``mimir <command>``."""
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    [positional] = [a for a in sub._actions if not a.option_strings]
    return list(positional.choices)


def test_every_derived_list_equals_the_hosts_list() -> None:
    hook_hosts = [h.name for h in HOSTS if h.hook]
    assert hook_hosts == ["claude-code", "cline", "codex", "gemini", "copilot"]
    parser = build_parser()
    assert choices(parser, "hook") == sorted(hook_hosts)
    for command in ("setup", "uninstall"):
        assert choices(parser, command) == sorted(h.name for h in HOSTS)
    assert hooks.USAGE.startswith("usage: mimir hook {" + ",".join(hook_hosts) + "} ")
    assert {h.name: h.module for h in HOSTS if h.hook} == hooks.HOST_MODULES
    assert {h.name: h.setup for h in HOSTS} == setup_cmd.SETUP_TARGETS
    for h in HOSTS:
        target = setup_cmd.target_module(h.name)
        assert target is importlib.import_module(h.setup)
        assert callable(target.setup) and callable(target.uninstall)
        if h.hook:
            assert hooks._handler(h.name, None) is importlib.import_module(h.module).handle
        else:
            with pytest.raises(ValueError, match=repr(h.name)):
                hooks._handler(h.name, None)


def test_installed_hooks_are_the_listed_events(tmp_path: Path) -> None:
    from mimir_integrations import claude_code, cline

    assert list(claude_code.hooks_config("mimir hook claude-code")) == list(
        host("claude-code").events
    )
    env = setup_cmd.SetupEnv(user_home=tmp_path)
    cline.setup(env)
    for directory in cline.hook_dirs(env):
        assert sorted(p.name for p in directory.iterdir()) == sorted(host("cline").events)


def test_each_extra_is_declared_in_pyproject() -> None:
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert [h.extra for h in HOSTS if h.extra not in extras] == []


def test_the_hosts_list_is_data_only() -> None:
    # ``mimir hook`` imports it on every tool call: no import beyond ``typing``.
    tree = ast.parse((ROOT / "integrations" / "hosts.py").read_text())
    imported = {
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    assert imported == {"__future__", "typing"}


def test_the_core_holds_no_host_payload_parsing() -> None:
    capture = ROOT / "mimir_core" / "ingest" / "capture"
    leaves = {h.module.rsplit(".", 1)[-1] for h in HOSTS}
    assert sorted(p.stem for p in capture.glob("*.py") if p.stem in leaves) == []
    for h in HOSTS:
        if h.hook:  # the adapter's own folder parses its payloads
            assert (ROOT / "integrations" / h.module.rsplit(".", 1)[-1] / "payload.py").is_file()


TOY = """
def handle(payload, ctx):
    return {"toy": payload["say"]}

def setup(env):
    return ["toy set up"]

def uninstall(env):
    return ["toy removed"]
"""

_ADD_A_HOST = """
import io, json, sys
sys.path.insert(0, sys.argv[1])
from mimir_integrations import hosts
hosts.HOSTS = (*hosts.HOSTS, hosts.Host("toy", module="toyhost", setup="toyhost", hook=True))
from mimir_integrations import cli, hooks, setup_cmd
parser = cli.build_parser()
sub = next(a for a in parser._actions if a.dest == "command").choices
got = {c: [a for a in sub[c]._actions if not a.option_strings][0].choices
       for c in ("hook", "setup", "uninstall")}
sys.stdin = io.TextIOWrapper(io.BytesIO(b'{"say": "hi"}'))
out = io.StringIO()
real, sys.stdout = sys.stdout, out
hooks.main(["toy", "--home", sys.argv[2]])
sys.stdout = real
print(json.dumps({"choices": {c: "toy" in v for c, v in got.items()},
                  "usage": "toy" in hooks.USAGE, "answer": out.getvalue(),
                  "setup": setup_cmd.run("toy"), "uninstall": setup_cmd.run("toy", remove=True)}))
"""


def test_a_host_added_to_the_list_alone_is_everywhere(tmp_path: Path) -> None:
    (tmp_path / "toyhost.py").write_text(textwrap.dedent(TOY))
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_ADD_A_HOST), str(tmp_path), str(tmp_path / "h")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "choices": {"hook": True, "setup": True, "uninstall": True},
        "usage": True,
        "answer": '{"toy": "hi"}',
        "setup": ["toy set up"],
        "uninstall": ["toy removed"],
    }
