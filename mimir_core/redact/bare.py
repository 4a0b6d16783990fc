"""Bare secrets in free text: random-looking tokens with no key name in front (stdlib only).

An agent's prose and tool output carry secrets without a ``KEY=`` to point at them: "call the
API with <40-char AWS secret key>", a bare 32-hex Datadog key, the base64 of ``user:pass`` in a
docker ``config.json``. Known formats and secret-looking names are handled by
:mod:`mimir_core.redact.core`; this module decides for *any* token of the base64 alphabet, as
detect-secrets' ``Base64HighEntropyString`` / ``HexHighEntropyString`` plugins and gitleaks'
generic rule do, with the same thresholds:

* a base64-like run (``[A-Za-z0-9+/=_-]``) of 20+ characters with Shannon entropy >= 4.5 bits
  per character;
* a hex run of 32+ characters with entropy >= 3.0 (all-digit runs are discounted as
  detect-secrets does: ``- 1.2 / log2(len)``);
* a 40-character ``[A-Za-z0-9+/]`` mixed-case token with entropy >= 4.0 (the shape of an AWS
  secret access key, which can fall just below 4.5);
* a base64 run that decodes to ``user:password`` (docker ``"auth"``, ``Basic`` blobs).

Ordinary coding text is left alone (the allowlist): git SHAs in a git context (``commit``,
``git show``, ``cherry-pick``, ``@<sha>`` pins, ``#<sha>`` lockfile refs), UUIDs, content
hashes (``sha256:``, ``sha512-`` integrity strings, ``h1:`` go.sum hashes, ``md5``/``checksum``/
``digest`` nearby, ``sha256sum`` listings), file paths and the path part of URLs, identifiers
in snake, kebab or camel case, and public SSH keys. A 32+ hex run with no such context is
redacted: a bare SHA is indistinguishable from a hex API key, and the review's bare 32-hex
Datadog key and 64-hex private key must not leak.

Everything here runs in linear time: one bounded regex finds the runs, and each run is
classified with a few passes over it (``collections.Counter`` for the entropy).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Final

__all__ = ["BARE_TOKEN_PATTERN", "ID_KEY_RE", "LazyRegex", "classify_bare", "shannon"]


class LazyRegex:
    """A regex compiled on first use, so that importing the redaction modules stays cheap (hooks
    import them). The one lazy pattern of :mod:`mimir_core.redact.core` and this module."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str | re.Pattern[str], flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = (
            pattern if isinstance(pattern, re.Pattern) else None
        )

    def get(self) -> re.Pattern[str]:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern, self.flags)
        return compiled

    def search(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.get().search(text, pos, endpos)

    def match(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.get().match(text, pos, endpos)

    def fullmatch(self, text: str) -> re.Match[str] | None:
        return self.get().fullmatch(text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.get().finditer(text)

    def findall(self, text: str) -> list[str]:
        return self.get().findall(text)

    def split(self, text: str) -> list[str]:
        return self.get().split(text)

    def sub(self, repl: str, text: str) -> str:
        return self.get().sub(repl, text)


BARE_TOKEN_PATTERN: Final = r"[A-Za-z0-9+/=_\-](?<![A-Za-z0-9+/=_\-].)[A-Za-z0-9+/=_\-]{11,}"

B64_LIMIT: Final = 4.5
HEX_LIMIT: Final = 3.0
AWS_SECRET_LIMIT: Final = 4.0
SHORT_MARGIN: Final = 0.8
_MAX_RUN: Final = 1 << 16  # longer runs are blobs: classified on their first 64 KB

_HEX_PART_RE: Final = LazyRegex(r"(?:0x)?([0-9a-fA-F]{32,})")
_PARTS_RE: Final = LazyRegex(r"[^\-_/+=]+")
_CHUNK_RE: Final = LazyRegex(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_VOWEL_RE: Final = LazyRegex(r"[aeiouyAEIOUY]")
_SEGMENT_SPLIT_RE: Final = LazyRegex(r"[\-_/+=]+")
_LOWER_HEX_RE: Final = LazyRegex(r"[0-9a-f]+")
#: How a redaction marker (``mimir_core.redact.core.marker``) starts.
_MARKER_START: Final = "[REDACTED:"
_NAME_PREFIX_RE: Final = LazyRegex(r"[A-Za-z_][A-Za-z0-9_\-]{0,60}=(?=[^=])")
_AWS_SECRET_RE: Final = LazyRegex(r"[A-Za-z0-9+/]{40}")
_B64_STRICT_RE: Final = LazyRegex(r"[A-Za-z0-9+/]{12,}={0,2}|[A-Za-z0-9_\-]{12,}={0,2}")
_USER_PASS_RE: Final = LazyRegex(r"[A-Za-z0-9._@+\\\-]{1,128}:[^\s]{3,256}")

# Words that make a hex run (or a base64 run) a hash or a git object, in the text just before.
_HASH_WORDS_RE: Final = LazyRegex(
    r"(?i)(?<![a-z0-9])(?:sha|sha-?1|sha-?224|sha-?256|sha-?384|sha-?512|md5|blake2b?|hash|"
    r"hashes|digest|checksum|checksums|integrity|etag|fingerprint|shasum|sha1sum|sha256sum|"
    r"md5sum|crc|hmac-sha256)(?![a-z])"
)
_GIT_WORDS_RE: Final = LazyRegex(
    r"(?i)(?<![a-z0-9])(?:git|commit|commits|committed|revert|reverts|reverted|cherry-pick|"
    r"cherry-picked|checkout|rebase|bisect|reset|merge|merged|head|rev|revision|ref|refs|"
    r"reference|tree|blob|parent|parents|object|tag|fixup|squash|pick|upstream|pinned|pin|"
    r"changeset|container|image|layer|build-id|buildid|sha|hash)(?![a-z])"
)
_ID_WORDS_RE: Final = LazyRegex(
    r"(?i)(?<![a-z0-9])(?:id|ids|uuid|uuids|experience|experiences|lesson|lessons|episode|"
    r"episodes|subject|supersedes|superseded|parent|row|rows)(?![a-z0-9])"
)
#: Dict keys whose string values are ids or hashes (``sanitize_obj`` judges a value under
#: such a key as if the text before it said "id").
ID_KEY_RE: Final = LazyRegex(
    r"(?i)(?:^|[^a-z])(?:ids?|uuids?|by|sha\d*|commit|digest|hash|checksum|etag|rev|revision|"
    r"ref|parent|parents|supersedes|superseded_by|replaced_by|experiences?|lessons?|episodes?|"
    r"subject|source|target|from|to|idempotency_key|idempotencykey|fingerprint|cursor)$"
    r"|[a-z]Ids?$|[a-z]IdempotencyKey$"
)
_HASH_PREFIX_RE: Final = LazyRegex(
    # a word of its own: "Irsha:" is no "sha:" (its run may be redacted, and the hash with it)
    r"(?i)(?<![A-Za-z0-9])"
    r"(?:sha(?:1|224|256|384|512)?|md5|h1|blake2b?|xxh\d{0,3}|git|sha-?256|digest)[:=]\Z"
)
_RUN_HASH_PREFIX_RE: Final = LazyRegex(r"(?i)(?:sha(?:1|224|256|384|512)|md5)-")
_SSH_PUBKEY_RE: Final = LazyRegex(
    r"(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d{3}|sk-ssh-ed25519@openssh\.com"
    r"|sk-ecdsa-sha2-nistp256@openssh\.com)[ \t]+\Z"
)
_URL_START_RE: Final = LazyRegex(r"[A-Za-z][A-Za-z0-9+.\-]{0,20}://[^\s\"'<>`]*\Z")
_HASH_LISTING_RE: Final = LazyRegex(r"(?: [ *]|\t)[^\s]")
_HASH_LENGTHS: Final = frozenset({32, 40, 56, 64, 96, 128})
_GIT_LENGTHS: Final = frozenset({40, 64})
_ID_LENGTHS: Final = frozenset({16, 32, 40})
_LOOKBACK: Final = 80
_PEM_LOOKBACK: Final = 16384
_PUBLIC_PEM_RE: Final = LazyRegex(
    r"-----BEGIN (?:[A-Z0-9 ]{0,20}PUBLIC KEY(?: BLOCK)?|(?:TRUSTED |X509 )?CERTIFICATE"
    r"(?: REQUEST)?|NEW CERTIFICATE REQUEST|X509 CRL|PGP SIGNATURE|PGP MESSAGE|PKCS7|CMS)-----"
)


def shannon(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character."""
    n = len(value)
    if not n:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _hex_entropy(value: str) -> float:
    """detect-secrets' hex entropy: all-digit runs are discounted (long numbers are not keys)."""
    entropy = shannon(value)
    if value.isdigit() and len(value) > 1:
        entropy -= 1.2 / math.log2(len(value))
    return entropy


def _is_word(segment: str) -> bool:
    """A name part a person wrote (``profile``, ``UserProfile``, ``HTTP2``, ``utf8``), not a
    random draw: few case or digit switches, at most one number, and every letter run of four
    or more has a vowel (``mzlg``, ``thrfu`` do not)."""
    if len(segment) <= 3 or segment.isdigit():
        return False
    chunks = _CHUNK_RE.findall(segment)
    if len(chunks) > max(2, len(segment) // 3) or sum(len(c) == 1 for c in chunks) > 1:
        return False
    if sum(c[0].isdigit() for c in chunks) > 1:
        return False
    return all(len(c) < 4 or c[0].isdigit() or _VOWEL_RE.search(c) for c in chunks)


def _pathish(run: str) -> bool:
    """``/home/me/project/src``, ``overlay2/<id>/merged``, ``user_profile_settings``.

    Every part is a word, a short piece (three characters or fewer), a number or, in a path,
    a lower-case hex id (paths hold content ids: docker layers, pip's wheel cache), and at
    least two parts are words. Random tokens fail: their parts are neither.
    """
    if "+" in run or "=" in run.rstrip("="):
        return False
    parts = [p for p in _SEGMENT_SPLIT_RE.split(run) if p]
    words = 0
    slashed = "/" in run  # hex ids only as directories: "acme_live_<hex>" is a token
    for p in parts:
        if _is_word(p):
            words += 1
        elif not (len(p) <= 3 or p.isdigit() or (slashed and _LOWER_HEX_RE.fullmatch(p))):
            return False
    return words >= 2


def _line_before(text: str, start: int) -> str:
    """The text of the run's line before it, at most ``_LOOKBACK`` characters."""
    lo = max(0, start - _LOOKBACK)
    nl = text.rfind("\n", lo, start)
    return text[(nl + 1 if nl >= 0 else lo) : start]


def _in_url_path(before: str) -> bool:
    """Whether the run continues a URL's host or path (not its query or fragment)."""
    m = _URL_START_RE.search(before)
    return m is not None and "?" not in m.group() and "#" not in m.group()


def _in_public_block(text: str, start: int) -> bool:
    """Whether ``start`` lies in a PEM block that is public (a certificate, a public key)."""
    lo = max(0, start - _PEM_LOOKBACK)
    begin = text.rfind("-----BEGIN ", lo, start)
    if begin < 0 or text.find("-----END ", begin, start) >= 0:
        return False
    return _PUBLIC_PEM_RE.match(text, begin) is not None


def _hash_context(text: str, start: int, end: int, before: str, length: int, run: str) -> bool:
    """Whether a hex or base64 run at ``start`` is a content hash or a git object id."""
    if before.endswith(("@", "#")) or _HASH_PREFIX_RE.search(before[-12:]) is not None:
        return True  # "actions/checkout@<sha>", "…git#<sha>", "sha256:<hex>", "h1:<b64>="
    if _RUN_HASH_PREFIX_RE.match(run) is not None:
        return True  # "sha512-<base64>" (npm/yarn integrity, Nix, SRI)
    if length in _HASH_LENGTHS and _HASH_WORDS_RE.search(before) is not None:
        return True
    if length in _GIT_LENGTHS and _GIT_WORDS_RE.search(before) is not None:
        return True
    if length in _ID_LENGTHS and _ID_WORDS_RE.search(before) is not None:
        return True  # Mimir's own ids: "experience <uuid4 hex>", "id": "<hex>"
    # "sha256sum" / "md5sum" / "git ls-files -s" listings: "<hex>  file"
    return (
        length in _HASH_LENGTHS
        and not before.strip()
        and _HASH_LISTING_RE.match(text, end) is not None
    )


def _basic_credentials(run: str) -> bool:
    """Whether ``run`` is the base64 of ``user:password`` (docker ``"auth"``, Basic blobs)."""
    core = run.rstrip("=")
    if len(core) < 12 or len(run) > 1024 or _B64_STRICT_RE.fullmatch(run) is None:
        return False
    padded = core + "=" * (-len(core) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        decoded = raw.decode("ascii")
    except (binascii.Error, ValueError):
        return False
    return decoded.isprintable() and _USER_PASS_RE.fullmatch(decoded) is not None


def classify_bare(text: str, start: int, end: int) -> tuple[int, str] | None:
    """Classify the run ``text[start:end]``: ``(offset, kind)`` to redact ``text[offset:end]``
    as ``[REDACTED:<kind>]``, or ``None`` to keep it.

    The offset skips a leading ``name=`` (``auth=<blob>`` keeps ``auth=``).
    """
    run = text[start:end]
    head = _NAME_PREFIX_RE.match(run)
    if head is None and text.startswith(_MARKER_START, end):
        # ``name=[REDACTED:…]``: the value went on an earlier pass, which kept ``name=`` as a
        # name; judged as a name again (not as a run of its own), redacting twice changes nothing
        head = _NAME_PREFIX_RE.match(run + "]")
    offset = start
    if head is not None and not _high_entropy_b64(head.group()[:-1]):
        offset = start + head.end()
        run = text[offset:end]
    if len(run) < 20:
        return (offset, "basic_auth") if _basic_credentials(run) else None
    before = _line_before(text, offset)
    kind = _kind(run)
    if kind is None:
        return None
    if _in_url_path(before) or _SSH_PUBKEY_RE.search(before) is not None:
        return None
    if _in_public_block(text, offset):
        return None
    if kind == "hex":
        length = max(len(m.group(1)) for m in _HEX_PART_RE.finditer(run))
    else:
        length = len(run.rstrip("="))
    if _hash_context(text, offset, end, before, length, run):
        return None
    if kind != "basic_auth" and _pathish(run):
        return None
    return offset, "high_entropy" if kind == "hex" else kind


def _high_entropy_b64(value: str) -> bool:
    return len(value) >= 20 and shannon(value[:_MAX_RUN]) >= B64_LIMIT


def _short_random(run: str) -> bool:
    """A 20-35 character token as random as its length allows (4.5 bits needs 23 distinct
    characters, so short random keys often fall below it): letters of both cases and digits,
    entropy within ``SHORT_MARGIN`` bits of ``log2(len)``, and not made of words."""
    n = len(run)
    if not 20 <= n <= 64 or shannon(run) < min(B64_LIMIT, math.log2(n) - SHORT_MARGIN):
        return False
    if not (any(c.isupper() for c in run) and any(c.islower() for c in run)):
        return False
    return any(c.isdigit() for c in run) and not _pathish(run) and not _identifier_like(run)


def _identifier_like(run: str) -> bool:
    """``getUser2FactorAuthTokenV3Handler``: mostly words of three letters or more."""
    worded = sum(len(c) for c in _CHUNK_RE.findall(run) if len(c) >= 3 and _VOWEL_RE.search(c))
    return worded >= 0.6 * len(run)


def _kind(run: str) -> str | None:
    """``"hex"``, ``"aws_secret_key"``, ``"basic_auth"``, ``"high_entropy"`` or ``None``."""
    sample = run[:_MAX_RUN]
    for part in _PARTS_RE.findall(sample):
        m = _HEX_PART_RE.fullmatch(part)
        if m is not None and _hex_entropy(m.group(1)) >= HEX_LIMIT:
            return "hex"
    if _basic_credentials(run):
        return "basic_auth"
    if _high_entropy_b64(sample):
        return "high_entropy"
    if _short_random(run):
        return "high_entropy"
    if (
        _AWS_SECRET_RE.fullmatch(run) is not None
        and any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and any(c.isdigit() for c in run)
        and shannon(run) >= AWS_SECRET_LIMIT
    ):
        return "aws_secret_key"
    return None
