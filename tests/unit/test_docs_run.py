"""Every code block and every ``mimir`` command in README.md and docs/*.md runs as written.

Each fenced block is handled by its language:

- ``python``: run in a fresh interpreter; ``bash``/``sh``: run by ``bash -e`` (a ``pip install``
  of this package is checked against pyproject.toml, not run: it needs the network). Both get
  a temporary ``HOME`` and ``MIMIR_HOME`` (never the real home), no ``ANTHROPIC_API_KEY``, the
  model offline (``HF_HUB_OFFLINE=1``), this venv's ``bin`` first on ``PATH``. They must exit 0.
- ``json``/``toml``: configuration the docs tell users to write; each is used the way Mimir uses
  it (a hook mapping is driven through ``mimir hook --config``; an MCP client entry's command is
  parsed by the ``mimir`` parser).
- ``text``: shown output or a picture, never run.

An HTML comment on the line(s) right before a fence changes that:

- ``<!-- not-run: reason -->``: not run, because it cannot run here (a real host, the network,
  a server that runs until stopped). The reason must be listed in :data:`NOT_RUN` too, so no
  block is left out silently; the ``mimir`` commands in it are still checked against the parser.
- ``<!-- setup: shell -->``: shell run before the block, in the same script (e.g. copying the
  store ``mimir demo`` leaves, ``$DEMO_HOME``, into ``$MIMIR_HOME``). ``les_…`` in a block stands
  for ``$LESSON``, an active lesson of that store.
- ``<!-- env: NAME=value: reason -->``: an environment variable for the block.

Every inline ``mimir …`` code span is checked too: its subcommand, choices and flags must be the
parser's.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "hosts").glob("*.md")),
]

HERMES_PIP = (
    '"$(dirname "$(readlink -f "$(command -v hermes)")")/python" -m pip install '
    "'mimir-lessons[hermes]'"
)
#: blocks marked ``not-run`` -> why (the first line of the block identifies it)
NOT_RUN = {
    ("README.md", "bash .ci/dev demo"): "creates .venv and installs from the network; "
    "CI runs `.ci/dev test` itself",
    ("README.md", "pip install 'mimir-lessons[mcp]' && mimir setup claude-code"): "changes the "
    "real ~/.claude/settings.json",
    ("docs/benchmarks.md", "python -m bench --quick"): "the benchmarks take minutes to hours; "
    "each part has a smoke test",
    ("docs/hooks.md", HERMES_PIP): "needs the Hermes Agent installed, and pip from the network",
    ("docs/ui.md", "mimir demo"): "`mimir ui` serves until stopped, and --open starts a browser",
}

RUNNABLE = {"python", "bash", "sh", "json", "toml"}
MARKER = re.compile(r"<!--\s*(not-run|setup|env):\s*(.*?)\s*-->")


@dataclass
class Block:
    page: str
    line: int
    lang: str
    code: str
    not_run: str | None = None
    setup: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    env_why: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def fenced_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of one page, with the markers on the lines right before each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page = path.relative_to(ROOT).as_posix()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^(`{3,})\s*([\w+-]*)", lines[i])
        if not fence:
            i += 1
            continue
        end = next(
            (j for j in range(i + 1, len(lines)) if lines[j].startswith(fence.group(1))), None
        )
        assert end is not None, f"{page}:{i + 1}: unclosed code block"
        block = Block(page, i + 1, fence.group(2), "\n".join(lines[i + 1 : end]) + "\n")
        j = i - 1
        while j >= 0 and (found := MARKER.search(lines[j])):
            kind, value = found.groups()
            if kind == "not-run":
                block.not_run = value
            elif kind == "setup":
                block.setup.insert(0, value)
            else:
                name, _, rest = value.partition("=")
                setting, _, why = rest.partition(":")
                block.env[name] = setting.strip()
                block.env_why[name] = why.strip()
            j -= 1
        blocks.append(block)
        i = end + 1
    return blocks


ALL_BLOCKS = [b for page in PAGES for b in fenced_blocks(page)]
TO_RUN = [b for b in ALL_BLOCKS if b.lang in RUNNABLE and b.not_run is None]


def first_words(block: Block) -> tuple[str, str]:
    """The key of :data:`NOT_RUN`: the page and the block's first line, without its comment."""
    return (block.page, block.code.splitlines()[0].split("  #", 1)[0].strip())


def test_every_block_says_what_it_is() -> None:
    untagged = [b.id for b in ALL_BLOCKS if not b.lang]
    assert not untagged, f"code blocks without a language (use `text` for pictures): {untagged}"
    unknown = [f"{b.id} ({b.lang})" for b in ALL_BLOCKS if b.lang not in RUNNABLE | {"text"}]
    assert not unknown, f"no runner for: {unknown}"
    assert len(TO_RUN) >= 8, [b.id for b in TO_RUN]  # the extractor finds the blocks
    unexplained = [b.id for b in ALL_BLOCKS for why in b.env_why.values() if not why]
    assert not unexplained, f"an env marker says why (NAME=value: reason): {unexplained}"
    for b in TO_RUN:  # shown with -rP: each block's embedder, and why
        if b.lang == "python" or b.setup:
            why = b.env_why.get("MIMIR_EMBEDDER", "the default, the real model")
            print(f"{b.id}: MIMIR_EMBEDDER={b.env.get('MIMIR_EMBEDDER', 'fastembed')}: {why}")


def test_not_run_blocks_are_the_listed_ones_with_their_reasons() -> None:
    marked = {first_words(b): b.not_run for b in ALL_BLOCKS if b.not_run is not None}
    assert all(marked.values()), f"a not-run marker needs a reason: {marked}"
    assert marked == NOT_RUN, f"marked in the docs: {marked}; listed in NOT_RUN: {NOT_RUN}"
    for key, reason in sorted(NOT_RUN.items()):  # shown with -rP
        print(f"not run: {key[0]} `{key[1]} …`: {reason}")


def test_the_extractor_reads_markers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "x\n<!-- not-run: needs a host -->\n```bash\nmimir a\n```\n"
        "<!-- setup: cp x y -->\n<!-- env: MIMIR_EMBEDDER=hash: exact words -->\n"
        "````python\nprint(1)\n````\n```\nart\n```\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    a, b, c = fenced_blocks(page)
    assert (a.lang, a.not_run, a.code, a.line) == ("bash", "needs a host", "mimir a\n", 3)
    assert (b.lang, b.setup, b.env, b.not_run) == (
        "python",
        ["cp x y"],
        {"MIMIR_EMBEDDER": "hash"},
        None,
    )
    assert b.env_why == {"MIMIR_EMBEDDER": "exact words"}
    assert (c.lang, c.code) == ("", "art\n")


# --- running -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The store ``mimir demo`` leaves, and one of its active lessons (made once per run)."""
    base = tmp_path_factory.mktemp("demo")
    home = base / "demo-home"
    env = sandbox_env(base, MIMIR_EMBEDDER="hash")  # the blocks using it say so (env markers)
    run = subprocess.run(
        [str(BIN / "mimir"), "demo", "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        cwd=base,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = subprocess.run(
        [str(BIN / "mimir"), "lessons", "--status", "active", "--json", "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        cwd=base,
        timeout=300,
        check=True,
    )
    return home, json.loads(out.stdout)[0]["id"]


def sandbox_env(tmp: Path, **extra: str) -> dict[str, str]:
    """A fresh HOME and MIMIR_HOME under ``tmp``; offline; no API key; this venv first."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MIMIR_", "ANTHROPIC_", "HERMES_")) and k not in ("VIRTUAL_ENV",)
    }
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        MIMIR_HOME=str(home / ".mimir"),
        TMPDIR=str(tmp),
        HF_HUB_OFFLINE="1",
        PATH=f"{BIN}:/usr/bin:/bin",
        **extra,
    )
    return env


#: Runs a Python block statement by statement like a script, and saves the repr of each top-level
#: expression's value by line (what a REPL would show), for :func:`expected_values`.
DRIVER = """
import ast, json, sys
path, out = sys.argv[1], sys.argv[2]
tree = ast.parse(open(path, encoding="utf-8").read(), path)
ns, values = {"__name__": "__main__"}, {}
for stmt in tree.body:
    if isinstance(stmt, ast.Expr):
        value = eval(compile(ast.Expression(stmt.value), path, "eval"), ns)
        values[stmt.end_lineno] = repr(value)
    else:
        exec(compile(ast.Module([stmt], []), path, "exec"), ns)
json.dump(values, open(out, "w"))
"""


def expected_values(code: str) -> list[tuple[int, str, str]]:
    """(line, kind, pattern) the block says it shows: ``print(...)  # text`` prints the line
    ``text``; an expression followed by a whole-line comment that reads like a value
    (``# Recommendation(action=..., ...)``) has that repr, ``...`` standing for anything."""
    lines = code.splitlines()
    found = []
    for n, line in enumerate(lines, 1):
        printed = re.match(r"^print\(.*\)\s+#\s+(.+)$", line)
        if printed:
            found.append((n, "print", printed.group(1).strip()))
        value = re.match(r"^#\s+([A-Z]\w*\(.*|[\[{'\"\d].*)$", line)
        if value and n > 1 and lines[n - 2].strip() and not lines[n - 2].startswith("#"):
            found.append((n - 1, "value", value.group(1).strip()))
    return found


def matches(pattern: str, text: str) -> bool:
    """``text`` is ``pattern`` with each ``...`` standing for any text."""
    parts = [re.escape(part) for part in pattern.split("...")]
    return re.fullmatch(".*".join(parts), text, flags=re.S) is not None


def pip_install(line: str, where: str) -> bool:
    """Whether ``line`` is ``pip install`` of this package (not run: it needs the network; its
    name and extras are checked against pyproject.toml instead)."""
    words = shlex.split(line.split("  #", 1)[0]) if line.strip() else []
    if words[:2] != ["pip", "install"] and words[:4] != ["python", "-m", "pip", "install"]:
        return False
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for req in (w for w in words[words.index("install") + 1 :] if not w.startswith("-")):
        name, _, extras = req.partition("[")
        assert name == project["name"], f"{where}: `{line}`: the package is {project['name']}"
        for extra in filter(None, extras.rstrip("]").split(",")):
            assert extra.strip() in project["optional-dependencies"], (
                f"{where}: `{line}`: no extra {extra!r}"
            )
    return True


def test_pip_install_lines_are_checked() -> None:
    assert pip_install("pip install 'mimir-lessons[mcp,ui]'  # the server", "x")
    assert not pip_install("mimir demo", "x")
    with pytest.raises(AssertionError, match="no extra 'nope'"):
        pip_install("pip install 'mimir-lessons[nope]'", "x")
    with pytest.raises(AssertionError, match="the package is mimir-lessons"):
        pip_install("python -m pip install mimir", "x")


def run_block(block: Block, tmp: Path, demo: tuple[Path, str]) -> subprocess.CompletedProcess[str]:
    env = sandbox_env(
        tmp, DEMO_HOME=str(demo[0]), LESSON=demo[1], TEST_DATA=str(ROOT / "tests/data"), **block.env
    )
    if block.lang == "python":
        assert not block.setup, f"{block.id}: setup is for shell blocks"
        (tmp / "block.py").write_text(block.code, encoding="utf-8")
        return subprocess.run(
            [sys.executable, "-c", DRIVER, str(tmp / "block.py"), str(tmp / "values.json")],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
            timeout=300,
        )
    code = "\n".join(
        f": checked, not run: {line}" if pip_install(line, block.id) else line
        for line in block.code.replace("les_…", '"$LESSON"').splitlines()
    )
    script = "\n".join([*block.setup, code])
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=300,
    )


@pytest.mark.parametrize(
    "block", [b for b in TO_RUN if b.lang not in ("json", "toml")], ids=lambda b: b.id
)
def test_the_block_runs(block: Block, tmp_path: Path, demo_home: tuple[Path, str]) -> None:
    out = run_block(block, tmp_path, demo_home)
    assert out.returncode == 0, (
        f"{block.id} ({block.lang}) failed with {out.returncode}:\n{block.code}\n"
        f"stdout:\n{out.stdout[-2000:]}\nstderr:\n{out.stderr[-3000:]}"
    )
    if block.lang != "python":
        return
    values = json.loads((tmp_path / "values.json").read_text())
    printed = [line.strip() for line in out.stdout.splitlines()]
    for line, kind, pattern in expected_values(block.code):
        if kind == "print":
            assert pattern in printed, (
                f"{block.id}: line {line} should print {pattern!r}: {printed}"
            )
        else:
            value = values.get(str(line), "<no expression on that line>")
            assert matches(pattern, value), f"{block.id}: line {line} is {value}, not {pattern}"


def test_expected_values_are_read_from_comments() -> None:
    code = (
        "x = 1\nprint(x)  # 1\nf(\n  2\n)\n# Rec(a='b', c=...)\n# a note\nprint(2)  # two words\n"
    )
    assert expected_values(code) == [
        (2, "print", "1"),
        (5, "value", "Rec(a='b', c=...)"),
        (8, "print", "two words"),
    ]
    assert matches("Rec(a='b', c=...)", "Rec(a='b', c=0.3)")
    assert not matches("Rec(a='b', c=...)", "Rec(a='x', c=0.3)")


# --- configuration blocks --------------------------------------------------------------------


def config_of(block: Block) -> dict[str, object]:
    data = json.loads(block.code) if block.lang == "json" else tomllib.loads(block.code)
    assert isinstance(data, dict)
    return data


def mcp_entries(data: dict[str, object]) -> list[dict[str, object]]:
    """The ``mimir`` server entries of a client's MCP configuration (JSON or Codex's TOML)."""
    servers = data.get("mcpServers") or data.get("mcp_servers") or {}
    assert isinstance(servers, dict)
    return [v for k, v in servers.items() if k == "mimir"]


@pytest.mark.parametrize(
    "block", [b for b in TO_RUN if b.lang in ("json", "toml")], ids=lambda b: b.id
)
def test_the_configuration_works(block: Block, tmp_path: Path) -> None:
    data = config_of(block)
    if "events" in data:  # a hook mapping: drive it with a prompt and a failed tool call
        config = tmp_path / "mapping.json"
        config.write_text(block.code)
        env = sandbox_env(tmp_path)
        payloads = [
            {"type": "prompt", "message": "deploy the app", "session": {"id": "s1"}},
            {
                "type": "tool_end",
                "session": {"id": "s1"},
                "tool": {
                    "name": "bash",
                    "args": {"command": "make deploy"},
                    "call_id": "c1",
                    "exit_code": 2,
                    "stderr": "no rule to make target",
                },
            },
        ]
        for payload in payloads:
            subprocess.run(
                [str(BIN / "mimir"), "hook", "--config", str(config)],
                input=json.dumps(payload),
                text=True,
                env=env,
                cwd=tmp_path,
                timeout=60,
                check=True,
            )
        mimir_home = Path(env["MIMIR_HOME"])
        assert not (mimir_home / "logs" / "hooks.log").exists(), (
            mimir_home / "logs" / "hooks.log"
        ).read_text()
        spooled = "".join(p.read_text() for p in mimir_home.rglob("pending.jsonl"))
        assert "make deploy" in spooled and "no rule to make target" in spooled
        return
    entries = mcp_entries(data)
    assert entries, f"{block.id}: neither a hook mapping nor an MCP client entry: {data}"
    for entry in entries:
        assert entry["command"] == "mimir"
        args = entry["args"]
        assert isinstance(args, list)
        check_command(["mimir", *map(str, args)], block.id)


# --- every mimir command, run or not --------------------------------------------------------


def parser_commands() -> dict[str, object]:
    from mimir_integrations.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return dict(sub.choices)  # type: ignore[attr-defined]


COMMANDS = parser_commands()


def check_command(words: list[str], where: str) -> None:
    """``mimir SUB [choices|--flags...]`` names a real subcommand, its choices and its flags.

    Usage notation is allowed: ``[...]``, ``a|b`` alternatives, ``…`` and upper-case placeholders.
    """
    assert words[0] in ("mimir", ".venv/bin/mimir"), words
    rest = [w.strip("[]()\\,;") for w in words[1:]]
    if not rest or rest[0].startswith("-"):
        assert all(w in ("--help", "--version", "-h") for w in rest if w.startswith("-")), words
        return
    sub_name = rest[0]
    assert sub_name in COMMANDS, f"{where}: `{' '.join(words)}`: no command {sub_name!r}"
    sub = COMMANDS[sub_name]
    options = set(sub._option_string_actions)  # type: ignore[attr-defined]
    choices = {c for a in sub._actions for c in (a.choices or ())}  # type: ignore[attr-defined]
    for word in rest[1:]:
        for alt in word.split("|"):
            alt = alt.split("=", 1)[0]
            if re.fullmatch(r"--?[a-z][\w-]*", alt):
                assert alt in options, f"{where}: `{' '.join(words)}`: {sub_name} has no {alt}"
            elif choices and "|" in word and alt and not alt.startswith("-"):
                assert alt in choices, f"{where}: `{' '.join(words)}`: {alt!r} is no choice"


def inline_commands(path: Path) -> list[tuple[str, list[str]]]:
    """(where, words) of every ``mimir …`` code span outside code blocks, and of every line of a
    shell block that starts with ``mimir``."""
    text = path.read_text(encoding="utf-8")
    page = path.relative_to(ROOT).as_posix()
    found: list[tuple[str, list[str]]] = []
    prose = re.sub(r"^(`{3,}).*?^\1", "", text, flags=re.S | re.M)
    for span in re.findall(r"`(mimir [^`]+)`", prose):
        found.append((page, span.replace("\\|", "|").split()))
    for block in fenced_blocks(path):
        if block.lang in ("bash", "sh", "console"):
            for line in block.code.splitlines():
                line = line.split("  #", 1)[0].strip()
                if line.startswith("mimir "):
                    found.append((f"{block.id}", shlex.split(line.replace("les_…", "ID"))))
    return found


ALL_COMMANDS = [c for page in PAGES for c in inline_commands(page)]


def test_every_mimir_command_in_the_docs_parses() -> None:
    assert len(ALL_COMMANDS) >= 50, len(ALL_COMMANDS)  # the extractor finds them
    for where, words in ALL_COMMANDS:
        check_command(words, where)


def test_every_command_is_in_the_cli_page() -> None:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    missing = sorted(name for name in COMMANDS if not re.search(rf"`mimir {name}\b", page))
    assert not missing, f"docs/cli.md does not show: {missing}"


def test_the_command_check_catches_stale_flags() -> None:
    with pytest.raises(AssertionError, match="no --nope"):
        check_command(["mimir", "lessons", "--nope"], "x")
    with pytest.raises(AssertionError, match="no command 'lesson'"):
        check_command(["mimir", "lesson"], "x")
    with pytest.raises(AssertionError, match="'vscode' is no choice"):
        check_command(["mimir", "setup", "claude-code|vscode"], "x")
    check_command(["mimir", "recall", "QUERY", "[-k", "5]", "[--scope", "P|*]"], "x")


def python_m_commands() -> list[tuple[str, list[str]]]:
    """(where, words) of every ``python -m …`` in the docs' prose and shell blocks."""
    found: list[tuple[str, list[str]]] = []
    for path in PAGES:
        page = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        prose = re.sub(r"^(`{3,}).*?^\1", "", text, flags=re.S | re.M)
        found += [(page, span.split()) for span in re.findall(r"`(python -m [^`]+)`", prose)]
        for block in fenced_blocks(path):
            if block.lang in ("bash", "sh"):
                for line in block.code.splitlines():
                    line = line.split("  #", 1)[0].strip()
                    if line.startswith("python -m "):
                        found.append((block.id, line.split()))
    return found


def check_python_m(words: list[str], where: str) -> None:
    """The module exists in this tree and every ``--flag`` is one its source defines."""
    module = words[2]
    base = ROOT.joinpath(*module.split("."))
    sources = [*base.rglob("*.py")] if base.is_dir() else [base.with_suffix(".py")]
    assert sources and sources[0].exists(), f"{where}: `{' '.join(words)}`: no module {module}"
    code = "".join(s.read_text(encoding="utf-8") for s in sources)
    for word in words[3:]:
        flag = word.strip("[]").split("=", 1)[0]
        if re.fullmatch(r"--?[a-z][\w-]*", flag):
            assert f'"{flag}"' in code, f"{where}: `{' '.join(words)}`: {module} has no {flag}"


def test_every_python_m_command_names_a_module_and_its_flags() -> None:
    commands = python_m_commands()
    assert len(commands) >= 20, len(commands)  # the extractor finds them
    for where, words in commands:
        check_python_m(words, where)
    with pytest.raises(AssertionError, match=r"no module bench\.nope"):
        check_python_m(["python", "-m", "bench.nope"], "x")
    with pytest.raises(AssertionError, match="has no --nope"):
        check_python_m(["python", "-m", "bench.learning", "--nope"], "x")


def test_every_pip_install_in_the_prose_names_this_package_and_its_extras() -> None:
    spans = [
        (path.name, span)
        for path in PAGES
        for span in re.findall(r"`((?:python -m )?pip install [^`]+)`", path.read_text("utf-8"))
        if "mimir" in span  # not an example of text, like security.md's `pip install …@sha`
    ]
    assert len(spans) >= 2, spans  # the extractor finds them
    for where, span in spans:
        assert pip_install(span, where)
