"""What an action *is*, beyond its wording: shell command or prose, and its command signature.

Shared by the recommender (which actions pool their evidence) and the lessons (which experiences
followed a lesson). Stdlib only.

Sentence embeddings see ``pytest tests/integration`` and ``alembic upgrade head && pytest
tests/integration`` as near-duplicates (cosine ~0.7), and ``docker build`` and ``docker buildx
build --platform linux/amd64`` too (0.86), though the extra step or flag is the whole point. The
**command signature** (the tools, their subcommands and long flags) tells them apart: two actions
whose signatures differ are never the same action.
"""

from __future__ import annotations

import functools
import re

_PROSE_WORDS = (
    "add added use used run ran set raise raised recreate recreated freeze froze call called "
    "delete deleted clear cleared execute executed try tried make made move moved grant granted "
    "pin pinned bump bumped switch switched wrap wrapped remove removed replace replaced install "
    "installed upgrade upgraded restart restarted increase increased reduce reduced change changed "
    "rewrite rewrote build built the a an then first"
)
PROSE_VERBS = frozenset(_PROSE_WORDS.split()) | {"took", "kept", "put", "got", "wrote", "reset"}
#: Words of a sentence, not of a command line (outside quotes), in a few languages.
_FUNCTION_WORDS = (
    "a the to before after instead of with was were it its "  # en
    "le la les du des dans au aux un une "  # fr
    "el los las con "  # es
    "no na em "  # pt
    "der die das den dem auf mit"  # de
)
FUNCTION_WORDS = frozenset(_FUNCTION_WORDS.split())
_CMD_FIRST = re.compile(r"^[a-z0-9][\w.+-]*$", re.ASCII)
_PAST_TENSE = re.compile(r"^[a-z]{3,}ed$")  # "exported", "enabled" (but not "sed")
_QUOTED = re.compile(r"'[^'\s]*'|'[^']*'(?=\s|$)|\"[^\"]*\"")
_SUBCOMMAND = re.compile(r"^[a-z][a-z-]*$")
_SEPARATORS = frozenset({"&&", "||", "|", ";", "then", "and"})


def looks_like_command(action: str) -> bool:
    """Whether an action reads as a shell command rather than a sentence.

    A command starts with a program name (ASCII, not an English verb such as "ran" or
    "exported"), has options, paths or operators (or is short), and holds no function words
    ("the", "to", "with", ...) outside quotes: "reset poetry.lock to the upstream version, ran
    poetry lock --no-update" is a sentence about commands, not one.
    """
    text = " ".join(action.split())
    first = text.split(" ", 1)[0] if text else ""
    commandish = any(t in text for t in (" -", "/", "&&", "|", "=", "::")) or len(text.split()) <= 3
    if not (_CMD_FIRST.match(first) and commandish):
        return False
    low = first.lower()
    if low in PROSE_VERBS or _PAST_TENSE.match(low):
        return False
    words = _QUOTED.sub(" ", text).lower().replace(",", " ").split()
    return not any(w in FUNCTION_WORDS for w in words)


@functools.lru_cache(maxsize=8192)
def command_signature(action: str) -> str | None:
    """The tools, subcommands and long flags of a shell command (``None`` for prose).

    ``alembic upgrade head && pytest tests/x -x`` → ``alembic pytest upgrade``.
    """
    if "`" in action or not looks_like_command(action):
        return None
    sig: set[str] = set()
    start, sub = True, False
    for raw in action.lower().split():
        tok = raw.strip(",;")
        if not tok or tok in _SEPARATORS:
            start, sub = True, False
            continue
        if start:
            sig.add(tok.rsplit("/", 1)[-1])
            start, sub = False, True
        elif sub and _SUBCOMMAND.match(tok):
            sig.add(tok)
            sub = False
        else:
            sub = False
            if tok.startswith("--") and len(tok) > 3:
                sig.add(tok.split("=", 1)[0])
        if raw != tok and raw.endswith((",", ";")):  # "head," ends a command
            start, sub = True, False
    return " ".join(sorted(sig))


_NORM = re.compile(r"[^\w]+", re.UNICODE)


@functools.lru_cache(maxsize=8192)
def normalise_action(action: str) -> str:
    """Case, punctuation and spacing folded: two phrasings of one action that differ only in
    those are the same action (memoised: each ``recommend`` folds ~200 actions, most seen
    before)."""
    return _NORM.sub(" ", action.lower()).strip()


# -- actions that must never be suggested ------------------------------------------------------

#: (why, pattern) of commands that destroy data outside the project or switch off a safety net.
#: Evidence that such a command "worked" is shown as a fact at most, never as a suggestion: one
#: poisoned session must not be able to teach an agent to pipe a download into a shell.
_DANGER_SOURCES: tuple[tuple[str, str], ...] = (
    (
        "pipes a download into a shell",
        r"(curl|wget|iwr|invoke-webrequest|fetch)\b[^|;&]*\|\s*(sudo\s+)?(ba|z|da|k|fi)?sh\b"
        r"|\b(ba|z)?sh\s+(-c\s+)?[\"']?\$\(\s*(curl|wget)\b|\b(ba|z)?sh\s+<\(\s*(curl|wget)\b"
        r"|\|\s*(sudo\s+)?python[0-9.]*\s+-?\s*$|(curl|wget)\b[^|;&]*\|\s*(sudo\s+)?python",
    ),
    (
        "deletes outside the project, or everything",
        r"\brm\s+(-[a-z]*[rf][a-z]*\s+|--recursive\s+|--force\s+|--no-preserve-root\s+)+"
        r"(--\s+)?[\"']?(/|~|\$home\b|\$\{home\}|\.\./|\.\.(\s|$)|\*(\s|$))",
    ),
    (
        "turns off TLS verification",
        r"--insecure\b|\bcurl\b[^|;&]*\s-[a-z]*k\b|verify\s*=\s*false\b|--no-check-certificate"
        r"|node_tls_reject_unauthorized\s*=\s*[\"']?0|strict-ssl\s*[= ]\s*false"
        r"|sslverify\s*[= ]\s*false|git_ssl_no_verify\s*=|pythonhttpsverify\s*=\s*[\"']?0"
        r"|--trusted-host\b|--disable-ssl|ssl_verify\s*[= ]\s*(false|0|no)\b"
        r"|--tls-verify\s*=\s*false|insecure-skip-tls-verify|stricthostkeychecking\s*=\s*no",
    ),
    (
        "makes files writable by everyone",
        r"\bchmod\s+(-[a-z]+\s+)*(0?777|a\+rwx|ugo\+rwx|o\+w)\b",
    ),
    (
        "wipes uncommitted or remote work",
        r"\bgit\s+(push\b[^;&|]*\s(--force\b|-f\b)|reset\s+--hard\b|clean\s+-[a-z]*[fx][a-z]*d"
        r"|clean\s+-[a-z]*d[a-z]*[fx])",
    ),
    (
        "destroys a disk or database",
        r"\bmkfs(\.\w+)?\b|\bdd\b[^;&|]*\bof=/dev/|\bdrop\s+(table|database|schema)\b"
        r"|\btruncate\s+table\b|\bwipefs\b|>\s*/dev/sd[a-z]",
    ),
    (
        "switches off a security control",
        r"\bsetenforce\s+0\b|\bufw\s+disable\b|\biptables\s+-f\b|--no-verify\b"
        r"|--disable-content-trust|\bsudo\s+chown\s+-r\s+\S+\s+/(\s|$)",
    ),
)
_DANGER: list[tuple[str, re.Pattern[str]]] = []


def destructive_reason(action: str) -> str | None:
    """Why ``action`` must never be suggested (it destroys data outside the project or turns
    off a safety net: ``curl … | sh``, ``rm -rf ~``, ``--insecure``, ``verify=False``,
    ``chmod 777``, ``git push --force``...), or ``None`` for an ordinary action.

    A person may still pin a lesson that names one; evidence alone never makes it advice."""
    if not _DANGER:  # compiled on first use: a hook that never asks pays nothing
        _DANGER.extend((why, re.compile(src, re.IGNORECASE)) for why, src in _DANGER_SOURCES)
    text = " ".join(action.split())
    for why, pattern in _DANGER:
        if pattern.search(text):
            return why
    return None


__all__ = [
    "PROSE_VERBS",
    "command_signature",
    "destructive_reason",
    "looks_like_command",
    "normalise_action",
]
