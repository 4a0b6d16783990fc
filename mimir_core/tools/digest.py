"""The lessons digest and the one rendering of injected memory (stdlib only).

Hook processes (Claude Code, Cline) run once per event and must answer in well under 100 ms, so
they cannot open LanceDB or load the embedding model. Instead the core keeps a small signed JSON
digest of the active, verified lessons at ``<home>/digest/lessons.json`` (rewritten atomically
whenever the active set changes), and hooks call :func:`render_context`, a keyword match of the
prompt against each lesson's trigger and rule with a relevance floor.

:func:`render_block` is the single rendering of lessons for a prompt, used both here and by
``Mimir.context()``: the lessons are fenced as data (``<mimir-memory>`` ... ``</mimir-memory>``,
the one fence of :mod:`mimir_core.tools.fence`, which MCP replies use too) with a one-line note
that they are recalled memory, not instructions; markup inside lesson text is neutralised so
it can never close the fence; the character budget is respected strictly; an empty string
means "nothing relevant" (never padding).

The digest is signed with the lessons' HMAC key; a digest whose signature fails (edited by hand,
or signed with another key) is never used.
"""

from __future__ import annotations

import json
import math
import os
import time
from _operator import _compare_digest as compare_digest
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..ingest.spool import ensure_private_dir, replace_file
from ..lessons.sign import canonical, hmac_sha256, read_key, sign, verify
from ..text import query_terms

# The fence and its neutraliser live in .fence (one for every host); named here too, as before.
from .fence import FENCE_CLOSE as FENCE_CLOSE
from .fence import FENCE_OPEN as FENCE_OPEN
from .fence import NOTE as NOTE
from .fence import neutralise as neutralise
from .fence import provenance_tag

DIGEST_VERSION = 1
#: The heading of the observations (facts from past attempts) inside the block.
OBSERVATIONS_HEADER = "Observed on tasks like this (facts from past attempts, not rules):"
#: Lessons shown at most, whatever the budget.
MAX_ITEMS = 5
#: Below this many characters of rule a clipped lesson is not worth showing.
MIN_RULE_CHARS = 40


def digest_path(home: str | os.PathLike[str]) -> Path:
    """``<home>/digest/lessons.json``."""
    return Path(home) / "digest" / "lessons.json"


# -- rendering ---------------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)].rstrip() + "…"


def render_line(item: Mapping[str, Any]) -> str:
    """One lesson as a line: ``- [id] avoid, confidence 0.72: rule``."""
    ident = neutralise(str(item.get("id", "")))
    kind = neutralise(str(item.get("kind", "")))
    conf = float(item.get("confidence", 0.0) or 0.0)
    tag = provenance_tag(item.get("from") or "")
    return (
        f"- [{ident}] {kind}, confidence {conf:.2f}{tag}: {neutralise(str(item.get('rule', '')))}"
    )


def render_block(
    items: Sequence[Mapping[str, Any]],
    budget_chars: int = 2000,
    *,
    extra: Sequence[str] = (),
    observations: Sequence[str] = (),
) -> str:
    """The fenced block for ``items`` (best first), at most ``budget_chars`` characters.

    ``items`` are lessons: mappings with ``id``, ``kind``, ``confidence`` and ``rule``.
    ``observations`` are facts from past attempts (worded by :mod:`mimir_core.observations`),
    shown after the lessons under their own heading, so an agent can tell a verified rule from
    an observation; ``extra`` lines (a recommendation) come last. Whatever does not fit the
    budget is left out, whole. Returns ``""`` when nothing is to be shown or nothing fits.
    """
    head = f"{FENCE_OPEN}\n{NOTE}\n"
    tail = FENCE_CLOSE
    room = budget_chars - len(head) - len(tail)
    lines: list[str] = []
    for item in list(items)[:MAX_ITEMS]:
        line = render_line(item)
        need = len(line) + 1  # the newline after it
        if need <= room:
            lines.append(line)
            room -= need
            continue
        # Clip the rule of the first lesson that does not fit, if enough of it remains useful.
        prefix_len = len(line) - len(neutralise(str(item.get("rule", ""))))
        keep = room - 1 - prefix_len
        if keep >= MIN_RULE_CHARS:
            clipped = line[:prefix_len] + _clip(line[prefix_len:], keep)
            lines.append(clipped)
            room -= len(clipped) + 1
        break
    facts = ["- " + neutralise(raw) for raw in observations]
    if facts and len(OBSERVATIONS_HEADER) + len(facts[0]) + 2 <= room:
        lines.append(OBSERVATIONS_HEADER)
        room -= len(OBSERVATIONS_HEADER) + 1
        for line in facts:
            if len(line) + 1 <= room:
                lines.append(line)
                room -= len(line) + 1
    for raw in extra:
        line = "- " + neutralise(raw)
        if len(line) + 1 <= room:
            lines.append(line)
            room -= len(line) + 1
    if not lines:
        return ""
    return head + "\n".join(lines) + "\n" + tail


# -- keywords ----------------------------------------------------------------------------------

_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "ers", "er", "ed", "es", "s")
#: Words so common in agent tasks that matching them alone says little about the topic.
_GENERIC_WORDS = (
    "fix fixed fixes fail fails failed failing failure error errors run runs running ran test "
    "tests issue problem broken break breaks work works working help please code file files "
    "new add added change changed update updated again still now because without instead "
    "first time same one two"
)
GENERIC = frozenset(_GENERIC_WORDS.split())


def stem(word: str) -> str:
    """A crude suffix-stripping stem (query and lessons are stemmed alike)."""
    w = word.lower()
    for suf in _SUFFIXES:
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: -len(suf)] + ("y" if suf in ("ies", "ied") else "")
    return w


def keywords(text: str) -> list[str]:
    """The distinct stemmed content words and identifiers of ``text``, in order."""
    idents, words = query_terms(text)
    is_ident = set(idents)  # set and dict lookups: linear in the text (lists made it quadratic)
    out: dict[str, None] = {}
    for tok in [*idents, *words]:
        s = tok if tok in is_ident else stem(tok)
        if len(s) > 1:
            out.setdefault(s, None)
    return list(out)


def _weight(term: str) -> float:
    if term in GENERIC or stem(term) in _GENERIC_STEMS:
        return 0.25
    return 1.0


_GENERIC_STEMS = frozenset(stem(w) for w in GENERIC)


def topic_keywords(tasks: Sequence[str], reasons: Sequence[str] = (), limit: int = 40) -> list[str]:
    """Keywords of a lesson's evidence: words in at least two of its tasks, and identifiers
    (error codes, paths, flags) from its tasks and recorded reasons."""
    counts: dict[str, int] = {}
    idents: list[str] = []
    for text in tasks:
        for kw in keywords(text):
            counts[kw] = counts.get(kw, 0) + 1
    for text in [*tasks, *reasons]:
        idents.extend(i for i in query_terms(text)[0] if len(i) >= 4)
    common = [kw for kw, n in counts.items() if n >= 2 or len(tasks) == 1]
    return list(dict.fromkeys([*idents, *common]))[:limit]


def digest_entry(
    lesson: Mapping[str, Any], evidence: Sequence[tuple[str, str]] = ()
) -> dict[str, Any]:
    """The digest's copy of one lesson, with its precomputed keywords.

    ``evidence``: (task, reason) of the experiences behind it, for the topic keywords.
    """
    trigger = str(lesson.get("trigger", ""))
    rule = str(lesson.get("rule", ""))
    tag = {"from": str(lesson["from"])} if lesson.get("from") else {}
    return {
        **tag,
        "id": lesson["id"],
        "rule": rule,
        "trigger": trigger,
        "kind": lesson.get("kind", ""),
        "scope": lesson.get("scope", ""),
        "confidence": round(float(lesson.get("confidence", 0.0) or 0.0), 4),
        "keywords": keywords(trigger),
        "topic_keywords": topic_keywords([t for t, _r in evidence], [r for _t, r in evidence]),
        "rule_keywords": keywords(rule + " " + str(lesson.get("action", ""))),
        "action": str(lesson.get("action", "") or ""),
    }


# -- the digest file ---------------------------------------------------------------------------


def write_digest(
    home: str | os.PathLike[str],
    lessons: Iterable[Mapping[str, Any]],
    key: bytes,
    evidence: Mapping[str, Sequence[tuple[str, str]]] | None = None,
) -> Path:
    """Atomically replace the digest with ``lessons`` (active and verified), signed with ``key``.

    ``evidence`` maps a lesson id to the (task, reason) of its experiences (topic keywords).
    """
    ev = evidence or {}
    body = {
        "version": DIGEST_VERSION,
        "generated_at": time.time(),
        "lessons": [digest_entry(lesson, ev.get(str(lesson["id"]), ())) for lesson in lessons],
    }
    data = dict(body, signature=sign(key, body))
    path = digest_path(home)
    ensure_private_dir(path.parent)  # its missing parents (the home) 0700 too, whatever the umask
    replace_file(path, canonical(data))
    return path


def resolve_key(home: str | os.PathLike[str], key: str | bytes | None = None) -> bytes | None:
    """The signing key as bytes: ``key`` (``MIMIR_SIGNING_KEY``, read by the adapter), else the
    per-install key file (``None`` when there is none yet)."""
    if isinstance(key, str):
        return key.encode("utf-8")
    return key if key is not None else read_key(home)


def read_digest(
    home: str | os.PathLike[str], key: str | bytes | None = None
) -> list[dict[str, Any]] | None:
    """The digest's lessons if the file exists and its signature verifies, else ``None``.

    ``key``: the signing key (``MIMIR_SIGNING_KEY``, read by the adapter); ``None`` uses the
    per-install key file. Without any key nothing can be verified, so nothing is returned.
    """
    raw_key = resolve_key(home, key)
    if raw_key is None:
        return None
    try:
        raw = digest_path(home).read_bytes()
        data = json.loads(raw)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != DIGEST_VERSION:
        return None
    signature = data.pop("signature", "")
    if not verify_written(raw_key, raw, signature) and not verify(raw_key, data, signature):
        return None
    lessons = data.get("lessons")
    return [x for x in lessons if isinstance(x, dict)] if isinstance(lessons, list) else None


def verify_written(key: bytes, raw: bytes, signature: object) -> bool:
    """Verify a digest as :func:`write_digest` wrote it without serialising it again.

    The file is the canonical JSON of the signed body plus its ``signature`` member, so the body's
    canonical bytes are the file without that member (a quote inside a string is escaped, so
    ``,"signature":"`` can only be the top-level key). Anything else falls back to
    :func:`verify` on the parsed body.
    """
    if not isinstance(signature, str) or not signature:
        return False
    member = b',"signature":' + json.dumps(signature).encode("utf-8")
    if raw.count(member) != 1:
        return False
    return compare_digest(hmac_sha256(key, raw.replace(member, b"", 1)), signature)


# -- matching ----------------------------------------------------------------------------------

#: A lesson is relevant when this share of its trigger's keyword weight is in the query...
COVERAGE_FLOOR = 0.25
#: ...and at least this much keyword weight matched (about two distinctive words, or one
#: identifier). Tuned on bench/data/retrieval_set.json: no wrong lesson, every unanswerable
#: query abstains.
WEIGHT_FLOOR = 1.5
#: Or this much weight from the trigger and the evidence's keywords, whatever the coverage.
STRONG_MATCH = 2.5
#: Query text matched at most (characters): a prompt's head and tail, where the ask and the
#: error are; a pasted 10 MB log would otherwise cost a hook seconds of tokenising.
MAX_QUERY = 16 * 1024
_QUERY_TAIL = 4 * 1024


def bounded_query(query: str) -> str:
    """``query`` itself, or its head and tail when longer than :data:`MAX_QUERY`."""
    if len(query) <= MAX_QUERY:
        return query
    return query[: MAX_QUERY - _QUERY_TAIL] + "\n" + query[-_QUERY_TAIL:]


def match(
    entries: Sequence[Mapping[str, Any]],
    query: str,
    *,
    scope: str | None = None,
    k: int = MAX_ITEMS,
) -> list[Mapping[str, Any]]:
    """The entries whose trigger the query covers well enough, best first (maybe none).

    BM25-lite: each matched keyword counts by its inverse document frequency over the digest
    (generic agent words count a quarter); a lesson needs enough of its trigger covered and
    enough absolute matched weight. Identifiers (error codes, paths, flags) weigh double.
    """
    query = bounded_query(query)
    qterms = set(keywords(query))
    if not qterms:
        return []
    n = max(len(entries), 1)
    postings: dict[str, list[int]] = {}  # keyword -> the entries that have it
    for i, e in enumerate(entries):
        terms = set(e.get("keywords", [])) | set(e.get("topic_keywords", []))
        for t in terms | set(e.get("rule_keywords", [])):
            postings.setdefault(t, []).append(i)
    df = {t: len(ids) for t, ids in postings.items()}
    # Only an entry sharing a keyword with the query can reach the weight floor: score those.
    candidates = sorted({i for t in qterms for i in postings.get(t, ())})
    idents = set(query_terms(query)[0])
    weights: dict[str, float] = {}  # a hook matches every prompt: each term is weighed once

    def w(term: str) -> float:
        got = weights.get(term)
        if got is None:
            # 1.0 for a keyword only one lesson has, less for keywords many lessons share.
            idf = math.log(1.0 + (n + 10.0) / (df.get(term, 1) + 0.5)) / math.log(
                1.0 + (n + 10.0) / 1.5
            )
            got = weights[term] = idf * _weight(term) * (2.0 if term in idents else 1.0)
        return got

    scored: list[tuple[float, int, Mapping[str, Any]]] = []
    for i in candidates:
        e = entries[i]
        if scope is not None and e.get("scope") not in ("", scope):
            continue
        trig = list(dict.fromkeys(e.get("keywords", [])))
        topic = [t for t in dict.fromkeys(e.get("topic_keywords", [])) if t not in trig]
        seen = {*trig, *topic}
        rule = [t for t in dict.fromkeys(e.get("rule_keywords", [])) if t not in seen]
        total = sum(w(t) for t in trig)
        if total <= 0:
            continue
        hit_trig = sum(w(t) for t in trig if t in qterms)
        hit_topic = sum(w(t) for t in topic if t in qterms)
        hit_rule = sum(w(t) for t in rule if t in qterms)
        coverage = hit_trig / total
        matched = hit_trig + hit_topic + 0.5 * hit_rule
        if matched < WEIGHT_FLOOR or (coverage < COVERAGE_FLOOR and matched < STRONG_MATCH):
            continue
        score = coverage + 0.1 * matched
        scored.append((score * (0.5 + 0.5 * float(e.get("confidence", 0.0) or 0.0)), i, e))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [e for _s, _i, e in scored[:k]]


def render_context(
    home: str | os.PathLike[str],
    query: str,
    *,
    scope: str | None = None,
    budget_chars: int = 2000,
    key: str | bytes | None = None,
) -> str:
    """The fenced lessons block for ``query`` from the digest alone (no store, no model).

    The same format as ``Mimir.context()``; ``""`` when the digest is missing, fails its
    signature, or nothing in it is relevant. Fast enough for a hook (a few milliseconds).
    """
    return render_block(lessons_for(home, query, scope=scope, key=key), budget_chars)


def lessons_for(
    home: str | os.PathLike[str],
    query: str,
    *,
    scope: str | None = None,
    key: str | bytes | None = None,
) -> list[Mapping[str, Any]]:
    """The digest's lessons relevant to ``query``, best first (none when the digest is
    missing or fails its signature)."""
    if not isinstance(query, str) or not query.strip():
        return []
    entries = read_digest(home, key)
    return list(match(entries, query, scope=scope)) if entries else []
