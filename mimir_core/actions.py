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


__all__ = ["PROSE_VERBS", "command_signature", "looks_like_command"]
