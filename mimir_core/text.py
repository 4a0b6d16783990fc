"""Text helpers shared by storage and recall: FTS text, tokens, identifiers (stdlib only)."""

from __future__ import annotations

import json
import re
from typing import Any

# CJK and kana have no spaces between words: split them into single characters so that the
# full-text index can match parts of a phrase. The patterns are compiled on first use, for text
# that is not ASCII: compiling this character class costs a hook process ~10 ms each.
_CJK_CLASS = r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
_CJK = f"({_CJK_CLASS})"
_CJK_RUN = _CJK_CLASS + "{2,}"
_CJK_SPACED = f" {_CJK} "
_COMPILED: dict[str, re.Pattern[str]] = {}
_TOKEN = re.compile(r"[\w][\w.\-/:]*[\w]|\w", re.UNICODE)
_WORD = re.compile(r"\w+", re.UNICODE)
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "else",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "into",
        "onto",
        "about",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "i",
        "we",
        "you",
        "he",
        "she",
        "they",
        "me",
        "my",
        "our",
        "your",
        "their",
        "do",
        "does",
        "did",
        "done",
        "doing",
        "how",
        "what",
        "why",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "not",
        "no",
        "yes",
        "so",
        "too",
        "very",
        "just",
        "again",
        "also",
        "any",
        "some",
        "all",
        "each",
        "every",
        "there",
        "here",
        "after",
        "before",
        "up",
        "down",
        "out",
        "over",
        "under",
        "off",
        "than",
        "via",
        "per",
        "get",
        "got",
        "make",
        "made",
        "use",
        "used",
        "using",
        "need",
        "needs",
        "want",
        "wanted",
        "try",
        "tried",
    ]
)


def _compiled(pattern: str) -> re.Pattern[str]:
    found = _COMPILED.get(pattern)
    if found is None:
        found = _COMPILED[pattern] = re.compile(pattern)
    return found


def fts_text(text: str) -> str:
    """Text as the full-text index should see it (CJK characters spaced apart)."""
    return text if text.isascii() else _compiled(_CJK).sub(r" \1 ", text)


def unfts_text(text: str) -> str:
    """The text :func:`fts_text` was given (it adds exactly one space either side of CJK)."""
    return text if text.isascii() else _compiled(_CJK_SPACED).sub(r"\1", text)


def context_text(context: dict[str, Any]) -> str:
    """The searchable words of a context object: its string and number values."""
    parts: list[str] = []

    def walk(value: Any, depth: int = 0) -> None:
        if depth > 8 or len(parts) > 200:
            return
        if isinstance(value, dict):
            for v in value.values():
                walk(v, depth + 1)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v, depth + 1)
        elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
            parts.append(str(value))

    walk(context)
    return " ".join(parts)


def is_identifier(token: str) -> bool:
    """Looks like an identifier: error code, path, function name, version, flag."""
    if len(token) < 3 and not any(c.isdigit() for c in token):
        return False
    has_digit = any(c.isdigit() for c in token)
    has_alpha = any(c.isalpha() for c in token)
    if any(c in token for c in "_./:") and len(token) > 2:
        return True
    if has_digit and has_alpha:
        return True
    if has_digit and len(token) >= 3:  # 429, 137, 11000
        return True
    inner_upper = any(c.isupper() for c in token[1:])
    return inner_upper and any(c.islower() for c in token)  # camelCase / PascalCase mixes


def query_terms(text: str) -> tuple[list[str], list[str]]:
    """(identifiers, words) of a query; words are lowercased content words."""
    idents: list[str] = []
    words: list[str] = []
    # A run of two or more CJK characters is matched exactly, like an identifier.
    if not text.isascii():
        idents.extend(run.lower() for run in _compiled(_CJK_RUN).findall(text))
    for tok in _TOKEN.findall(fts_text(text)):
        tok = tok.strip(".:/-")
        if not tok:
            continue
        if is_identifier(tok):
            idents.append(tok.lower())
        for w in _WORD.findall(tok):
            lw = w.lower()
            if lw not in STOPWORDS and (len(lw) > 1 or not lw.isascii()):
                words.append(lw)
    return list(dict.fromkeys(idents)), list(dict.fromkeys(words))


def fts_groups(text: str) -> list[str]:
    """The full-text query for ``text``: groups of terms, each of which a row must contain in
    full to match; a row matching any group is a candidate.

    Each identifier is a group (a path's every part), and the content words are one group.
    Recall keeps a row that the vector search did not bring only when it holds an identifier of
    the query or every content word of it (:class:`~mimir_core.search.recall.RecallTuning`), so rows
    sharing a few words are left to the vector search, which ranks them better; and the index
    is spared the long posting lists of common words, which were most of its cost.
    """
    idents, words = query_terms(text)
    groups: dict[frozenset[str], str] = {}
    for group in [*idents, " ".join(words)]:
        terms = frozenset(word_set(group))
        if terms and terms not in groups:  # "src/app/main.py" alone: one group, not two
            groups[terms] = " ".join(fts_text(group).split())
    return list(groups.values())


def word_set(text: str) -> set[str]:
    """The lowercased words of a text (CJK characters count as words)."""
    return {w.lower() for w in _WORD.findall(fts_text(text))}


def dumps(value: Any) -> str:
    """Compact, stable JSON."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
