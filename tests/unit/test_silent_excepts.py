"""Every broad ``except`` that swallows an error says why, or leaves a trace.

A handler of ``Exception``, ``BaseException`` or everything (bare ``except:``) is *silent* when
it neither logs, nor always raises, nor passes the error on (records it, returns it, hands it to a
future); a silent one must carry a comment on its ``except`` line, the line above, or the first
line of its body saying why the error may vanish. The test counts them, so a new silent block
without a reason fails here rather than in a user's empty log.
"""

from __future__ import annotations

import ast
import io
import textwrap
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ["mimir_core", "integrations", "hermes_plugin"]
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}
#: Calls that only *look at* the error (is it a real one?), not report it.
CHECKS = {"is_error", "isinstance"}


def _broad(node: ast.expr | None) -> bool:
    if node is None:
        return True
    if isinstance(node, ast.Name):
        return node.id in ("Exception", "BaseException")
    return isinstance(node, ast.Tuple) and any(_broad(e) for e in node.elts)


def _reports(handler: ast.ExceptHandler) -> bool:
    """True when the handler logs, always raises, or passes the error on."""
    if isinstance(handler.body[-1], ast.Raise):
        return True
    checked: set[int] = set()
    for node in ast.walk(handler):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr in LOG_METHODS:
            return True
        if isinstance(node.func, ast.Name) and node.func.id in CHECKS:
            checked.update(id(a) for a in node.args)
    if handler.name is None:
        return False
    return any(
        isinstance(node, ast.Name) and node.id == handler.name and id(node) not in checked
        for node in ast.walk(handler)
    )


def silent_handlers(source: str) -> list[tuple[int, bool]]:
    """(line, has a reason) for each silent broad handler of ``source``."""
    comments = {
        tok.start[0]
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ExceptHandler) and _broad(node.type) and not _reports(node):
            lines = {node.lineno, node.lineno - 1, node.body[0].lineno}
            found.append((node.lineno, bool(lines & comments)))
    return sorted(found)


def test_every_silent_broad_except_says_why() -> None:
    silent, unexplained = [], []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, reason in silent_handlers(path.read_text(encoding="utf-8")):
                where = f"{path.relative_to(ROOT)}:{line}"
                silent.append(where)
                if not reason:
                    unexplained.append(where)
    print(f"{len(silent)} silent broad except blocks, each with its reason")
    assert unexplained == [], f"log the error or say why it is silent: {unexplained}"


def test_the_check_tells_silent_from_reported() -> None:
    source = textwrap.dedent(
        """
        import logging
        log = logging.getLogger()
        try: f()
        except Exception: pass
        try: f()
        except Exception:  # fail open: the host must never see this
            pass
        try: f()
        except BaseException as exc:
            if not is_error(exc):
                raise
            continue
        try: f()
        except:
            log.debug("f failed", exc_info=True)
        try: f()
        except Exception as exc:
            problems.append(str(exc))
        try: f()
        except Exception:
            raise RuntimeError("f") from None
        try: f()
        except ValueError:
            pass
        """
    )
    assert silent_handlers(source) == [(5, False), (7, True), (10, False)]
