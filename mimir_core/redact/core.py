"""Secret redaction, ``<private>`` removal and size caps (stdlib only, safe to import in hooks).

Everything an agent does may pass through here on its way into memory: shell commands, file
contents, HTTP calls, stack traces. The functions are built for that setting:

* **stdlib only**, tiny import cost: every regex is compiled once, on first use, and cached at
  module level (importing takes a few milliseconds; a rule's regex is only compiled once a
  text contains that rule's cheap substring hint);
* **linear time**: every pattern is bounded (no nested unbounded quantifiers; patterns that
  start with a repeated character class are anchored by a look-behind so that a run of such
  characters is tried once); case-insensitive rules are tried only at the positions where a
  literal anchor occurs in the lower-cased text, and a declined match resumes past its value.
  A megabyte of adversarial text (``"a" * 10**6``, ``"password=" * 10**5``, base64 runs, ...)
  is processed in well under a second;
* **never raises** on ``str`` input (only :func:`cap` and :func:`sanitize_obj` reject a
  non-positive limit, and an invalid user pattern in ``extra_patterns`` raises
  :class:`re.error`).

Each secret is replaced by ``[REDACTED:<kind>]`` (for example ``[REDACTED:github_token]``) and
the non-secret context is kept: ``API_KEY=[REDACTED:api_key]``,
``postgres://user:[REDACTED:url_credentials]@host/db``, ``Authorization: Bearer
[REDACTED:bearer_token]``. :func:`redact` is idempotent: no match may start or end inside an
existing marker, markers are never masked again, and the rules are re-applied until nothing
changes (normally one extra pass, only when the first pass found something).

Detection has four layers, applied in this order:

1. **Known formats** with a recognisable shape: PEM/PuTTY private keys, JWTs, cloud and SaaS
   tokens (AWS, GCP, Azure, GitHub, GitLab, Slack, Stripe, OpenAI, Anthropic, Hugging Face,
   npm, PyPI, SendGrid, Twilio, Mailgun, Discord, Telegram, Heroku, DigitalOcean, Shopify,
   Square, Databricks, Vault, Doppler, Linear, Notion, Atlassian, Terraform Cloud, age, ...).
   See :data:`KINDS` for the full list.
2. **Context**: credentials in URLs (``scheme://user:pass@host``), ``Authorization`` /
   ``Cookie`` headers, ``curl -u user:pass``, ``mysql -pSECRET``, ``.netrc`` lines.
3. **Assignments** to secret-looking names (``password=``, ``DB_PASS:``, ``--token X``,
   ``"apiKey": "..."``, ``<password>..</password>``, ...). Password-like names redact any
   literal value; token/secret/api-key names redact literal values of 8+ characters that look
   like a secret (letters and digits, or high entropy); other
   ``*key`` names (``DATADOG_KEY``, ``cache_key``) only redact values of 20+ characters with
   high Shannon entropy.
4. **Bare tokens** anywhere in free text, with no name in front (:mod:`mimir_core.redact.bare`):
   high-entropy base64 and hex runs as detect-secrets' plugins flag them, short random tokens,
   base64 of ``user:password``; git SHAs in a git context, UUIDs, content hashes, ids named as
   ids, paths and URL paths are kept.

What is deliberately *not* redacted (to keep ordinary agent text intact):

* values that are references, not literals: ``${VAR}``, ``$VAR``, ``$(cmd)``, ``%VAR%``,
  ``{{ tmpl }}``, ``{name}``, ``<password>``, masks such as ``***`` or ``xxxx``, ``null`` /
  ``None`` / ``true`` / ``false``, type names (``password: str``), function calls
  (``password = get_password()``), attribute chains (``token = self.token``,
  ``api_key=settings.API_KEY``), subscripts (``os.environ["X"]``) and identifiers that name a
  variable holding the secret (``password=password``, ``token=new_token``, ``hashedPassword``);
* prose (``password reset email``, ``token bucket``, ``tokenizer``, ``invalid token: expected
  ')'``), git SHAs in a git context, UUIDs, content hashes, low-entropy base64, file
  paths, URLs without credentials, ``PWD=/home/me``, ``session_id`` of an agent session (a
  32+ hex run with no such context *is* redacted: it cannot be told from a hex API key).

Literal placeholders that *are* literals, such as ``changeme`` or ``password123``, are redacted:
they are often real default credentials, and over-redacting a placeholder costs nothing. Obvious
documentation placeholders are kept: ``your-api-key``, ``<token>``, ``xxxx``, ``fake-secret``,
``https://user:pass@host``.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple, TypeAlias

from .bare import BARE_TOKEN_PATTERN, ID_KEY_RE, classify_bare, shannon
from .bare import LazyRegex as _Lazy

__all__ = [
    "DEPTH_MARKER",
    "KINDS",
    "MAX_DEPTH",
    "PRIVATE",
    "REDACTED",
    "cap",
    "contains_secret",
    "marker",
    "redact",
    "redact_identifier",
    "sanitize",
    "sanitize_obj",
    "strip_private",
]

REDACTED: Final = "[REDACTED]"
"""Generic marker; actual replacements carry a kind: ``[REDACTED:<kind>]`` (see :func:`marker`)."""

PRIVATE: Final = "[PRIVATE]"
"""What a ``<private>...</private>`` span becomes."""

DEPTH_MARKER: Final = "[TRUNCATED:depth]"
"""What :func:`sanitize_obj` puts in place of containers nested deeper than :data:`MAX_DEPTH`."""

MAX_DEPTH: Final = 50
"""Maximum container nesting :func:`sanitize_obj` descends into."""

PatternLike: TypeAlias = "str | re.Pattern[str]"
"""A user-supplied extra pattern: regex source or a compiled pattern."""

_MAX_PASSES: Final = 6
_MAX_CACHED: Final = 512


_MARKER_RE: Final = _Lazy(r"\[(?:REDACTED(?::[A-Za-z0-9_.\-]{1,40})?|PRIVATE)\]")


def _cache_short(func: Callable[[str], bool]) -> Callable[[str], bool]:
    """Memoise a predicate on short strings (long ones are rare and not worth keeping)."""
    cached = functools.lru_cache(maxsize=2048)(func)

    @functools.wraps(func)
    def wrapper(value: str) -> bool:
        return cached(value) if len(value) <= _MAX_CACHED else func(value)

    return wrapper


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def marker(kind: str) -> str:
    """The replacement text for a secret of ``kind``: ``[REDACTED:<kind>]``."""
    return f"[REDACTED:{kind}]"


def _is_marker(value: str) -> bool:
    return _MARKER_RE.fullmatch(value) is not None


# ---------------------------------------------------------------------------------------------
# Value heuristics
# ---------------------------------------------------------------------------------------------

_DIGIT_RE: Final = _Lazy(r"[0-9]")
_ALPHA_RE: Final = _Lazy(r"[^\W\d_]")
_SPACE_RE: Final = _Lazy(r"\s")
_LOWER_RE: Final = _Lazy(r"[a-z]")
_UPPER_RE: Final = _Lazy(r"[A-Z]")
_HEX_RE: Final = _Lazy(r"[0-9a-fA-F\-]+")
_PATHISH_RE: Final = _Lazy(r"(?:[~.]{0,2}/|[A-Za-z]:\\|[A-Za-z][A-Za-z0-9+.\-]{0,20}://)")
_FILE_EXT_RE: Final = _Lazy(r"\.[A-Za-z][A-Za-z0-9]{0,7}\Z")
_WORD_SEG_RE: Final = _Lazy(r"[A-Z]?[a-z]{4,}")
_CAPITALIZED_RE: Final = _Lazy(r"[A-Z][a-z]+")


@_cache_short
def _highshannon(value: str) -> bool:
    """Whether ``value`` looks like a random credential (20+ chars, mixed, high entropy)."""
    if len(value) < 20 or len(value) > 4096 or _SPACE_RE.search(value):
        return False
    if _PATHISH_RE.match(value) or _FILE_EXT_RE.search(value):
        return False
    if value.count("/") >= 2 and len(_WORD_SEG_RE.findall(value)) >= 2:
        return False  # a path: "datasets/nyc-taxi/year=2019/part-0"
    digits = len(_DIGIT_RE.findall(value))
    if _HEX_RE.fullmatch(value):
        return digits >= 2 and shannon(value.replace("-", "")) >= 3.0
    classes = (
        (_LOWER_RE.search(value) is not None) + (_UPPER_RE.search(value) is not None) + (digits > 0)
    )
    if classes < 2 or shannon(value) < 3.5:
        return False
    # Word-like values (``user_profile_settings_v2``) are names, not keys.
    word_chars = sum(map(len, _WORD_SEG_RE.findall(value)))
    return digits >= 4 or word_chars < len(value) // 2


@_cache_short
def _secret_shaped(value: str) -> bool:
    """Loose test for a secret: letters and digits, or a long high-entropy string."""
    if len(value) < 6 or _SPACE_RE.search(value):
        return False
    if _DIGIT_RE.search(value) and _ALPHA_RE.search(value):
        return True
    if _CAPITALIZED_RE.fullmatch(value):
        return False  # a type or a word: "Credentials"
    return len(value) >= 12 and shannon(value) >= 3.3


_PLACEHOLDER_RE: Final = _Lazy(
    r"""
    \$\{[^{}]{0,200}\}              # ${VAR} ${VAR:-x}
  | \$\([^()]{0,200}\)              # $(cmd)
  | \$[A-Za-z_][A-Za-z0-9_]{0,100}  # $VAR
  | %[A-Za-z_][A-Za-z0-9_]{0,100}%  # %VAR%
  | %\([A-Za-z_][A-Za-z0-9_]{0,100}\)[sdr]   # %(name)s
  | \{\{.{0,200}\}\}                # {{ template }}
  | \{[A-Za-z0-9_.]{0,100}\}         # {name}, {0}, {} (f-string / format)
  | %[sdr]                          # %s
  | <[^<>]{1,100}>                  # <password>
  | [*xX.\u2022\u00b7#?_\-]{3,}     # ***, xxxx, ..., ••••
  | \u2026
  | (?i:your|my|insert|enter|replace|put)[-_ ](?:[A-Za-z]{1,20}[-_ ]?){1,6}(?i:here)?
  | (?i:(?:[A-Za-z_\-]{0,40}[-_])?(?:here|placeholder|example|dummy|redacted))
  | (?i:fake|dummy|test|example|sample)[-_][A-Za-z_\-]{0,40}
  | .{0,40}(?:\*{3,}|x{4,}|X{4,}|\.{3,}|\u2026).{0,40}    # partly masked: hf_***, sk-...abcd
    """,
    re.VERBOSE | re.DOTALL,
)
_NON_SECRET_WORDS: Final = _words(
    """null none nil true false undefined yes no on off required optional str string bytes int
    bool any secretstr secretbytes text number object env empty redacted hidden masked n/a
    na tbd todo unknown unset default auto prompt stdin await async new lambda function yield
    typeof require import not input getpass"""
)
_NAME_LIKE_RE: Final = _Lazy(r"[A-Za-z_$][A-Za-z0-9_$\-]{0,200}")
_ENV_NAME_RE: Final = _Lazy(r"_{0,2}[A-Z]{2,}[A-Z0-9]*(?:_[A-Z][A-Z0-9]+){1,10}")
_PASCAL_RE: Final = _Lazy(r"(?:[A-Z][a-z]{2,}){2,10}")
_IDENT_CHAIN_RE: Final = _Lazy(
    r"[A-Za-z_$][A-Za-z0-9_$]{0,100}(?:\.[A-Za-z_$][A-Za-z0-9_$]{0,100}){0,20}"
)
_CODE_OBJECTS: Final = _words(
    """self this cls os process env settings config conf cfg args opts options request req ctx
    context secrets vars params props app import environ credentials creds keys auth window
    document module exports data user account"""
)
_SECRET_WORD_RE: Final = _Lazy(
    r"(?i)passw(?:or)?d|passphrase|secret|token|credential|pwd|pass(?![a-z])|key(?![a-z])"
)
_NAME_RESIDUES: Final = frozenset({"", "s", "api"})  # "credentials", "tokens", "apikey"
_CAMEL_RE: Final = _Lazy(r"[a-z0-9][A-Z]")
_SNAKE_WORD_RE: Final = _Lazy(r"(?:^|_)[a-z]{4,}(?:_|$)")
_METAVAR_RE: Final = _Lazy(r"[A-Z][A-Z_]{1,30}")
_PROSE_WORDS: Final = _words(
    """options option flag flags argument arguments arg args parameter parameters param and or
    is are was were be the a an to for with from when if instead must should can cannot will
    only not switch field value values prompt env environment variable variables file using
    which that this it as in on of by at requires required missing needs expects given"""
)


@_cache_short
def _is_placeholder(value: str) -> bool:
    v = value.strip()
    if not v or _is_marker(v):
        return True
    if v.lower() in _NON_SECRET_WORDS:
        return True
    return _PLACEHOLDER_RE.fullmatch(v) is not None


@_cache_short
def _names_a_secret(value: str) -> bool:
    """Whether ``value`` is an identifier naming a secret rather than being one.

    ``AWS_SECRET_ACCESS_KEY``, ``new_password``, ``accessToken``, ``credentials``: a word such
    as password/secret/token/key plus identifier structure (``_``, camelCase) or no digits.
    """
    if _ENV_NAME_RE.fullmatch(value) or _PASCAL_RE.fullmatch(value):
        return True  # LAMBDA_TASK_ROOT, CertificateIssuerPrivateKeyTypes
    if _NAME_LIKE_RE.fullmatch(value) is None or _SECRET_WORD_RE.search(value) is None:
        return False
    if "_" in value or "-" in value or _CAMEL_RE.search(value) is not None:
        return True
    # A plain word names a secret only if it is nothing but secret words ("password",
    # "credentials", "apikey"): "topsecret", "adminpass" or "secretsauce" are literal passwords.
    residue = _SECRET_WORD_RE.sub("", value).lower()
    return not _DIGIT_RE.search(value) and residue in _NAME_RESIDUES


def _is_code_reference(value: str, name: str, sep: str, following: str) -> bool:
    """Whether an unquoted assignment value is code (a variable, call or attribute)."""
    if _IDENT_CHAIN_RE.fullmatch(value) is None:
        return False
    if following in ("(", "[", ")"):
        return True  # call, subscript, or last keyword argument
    if following == "," and "=" in sep:
        return True  # keyword argument
    words = _name_words(name)
    if words and value.lower().strip("_") in (words[-1], "".join(words)):
        return True  # password=password, self._token = token
    if " " in sep and "=" in sep and "_" in value and _SNAKE_WORD_RE.search(value):
        return True  # "password = user_input" (code), not INI
    if "." in value:
        head = value.split(".", 1)[0].lower()
        if head in _CODE_OBJECTS or " " in sep or "=" not in sep:
            return True
    return any(_names_a_secret(part) for part in value.split("."))


# ---------------------------------------------------------------------------------------------
# Secret-looking names
# ---------------------------------------------------------------------------------------------

_CAMEL_SPLIT_RE: Final = _Lazy(r"(?<=[a-z0-9])(?=[A-Z])")
_NAME_SPLIT_RE: Final = _Lazy(r"[_\-.\s:/]+")
_NAME_SUFFIXES: Final = _words("base value b64 base64 hex str string raw plain encoded")
_TOKEN_NOT_SECRET_PREV: Final = _words(
    """max min num n total count input output prompt completion pad eos bos unk sep cls mask
    special start end stop next page continuation cursor sync pagination cancellation cancel
    reasoning cached cache"""
)
_STRONG_KEY_PREV: Final = _words(
    """api access secret private signing sign encryption encrypt decryption master client auth
    app application license subscription functions function service account storage admin
    write deploy webhook jwt hmac crypto cipher aes gpg pgp ssh shared consumer
    management mgmt integration bot ingest ingestion rest server"""
)
_PUBLIC_KEY_PREV: Final = _words("public pub publishable")
_COMPOUND_STRONG_KEYS: Final = tuple(
    sorted(
        _words(
            """apikey accesskey secretkey privatekey masterkey signingkey encryptionkey clientkey
            authkey appkey servicekey accountkey"""
        )
    )
)
_DICT_ONLY_SECRET_NAMES: Final = _words(
    "authorization proxy_authorization cookie cookies set_cookie x_api_key"
)


def _name_words(name: str) -> list[str]:
    stripped = name.strip("-\"'\\ ")
    return [w for w in _NAME_SPLIT_RE.split(_CAMEL_SPLIT_RE.sub("_", stripped).lower()) if w]


@functools.lru_cache(maxsize=4096)
def _classify_name(name: str) -> tuple[str, str] | None:
    """Classify a variable/field/flag name: ``(tier, kind)`` or ``None`` if not secret.

    Tiers: ``"password"`` (any literal value is secret), ``"secret"`` (secret-shaped literal
    values of 8+ characters), ``"weak"`` (only high-entropy values of 20+ characters).
    """
    words = _name_words(name)
    if not words:
        return None
    if words[-2:] in (["connection", "string"], ["conn", "str"]) or words[-1] in (
        "connectionstring",
        "connstr",
    ):
        return ("secret", "secret")
    if len(words) > 1 and words[-1] in _NAME_SUFFIXES:
        words = words[:-1]
    last = words[-1]
    prev = words[-2] if len(words) > 1 else ""
    joined = "".join(words)
    vendor = _vendor_kind(joined)
    if last.endswith(("password", "passwd", "passphrase")):
        return ("password", "password")
    if last == "pwd" and len(words) > 1:
        return ("password", "password")
    if last == "pass":
        bare = name.strip("\"'\\ ")
        if "-" in bare.lstrip("-") and not bare.isupper():
            return ("secret", "password")  # "two-pass: ..." is prose; ask for a secret shape
        return ("password", "password")
    if len(words) == 1 and last.endswith(("sessionid", "sessid")):
        return ("secret", "session_id")
    if last.endswith("token"):
        if prev in _TOKEN_NOT_SECRET_PREV or last in ("maxtoken", "numtoken"):
            return None
        return ("secret", vendor or "token")
    if last.endswith("secret"):
        return ("secret", vendor or "secret")
    if last in ("credential", "credentials", "creds"):
        return ("secret", "secret")
    if last.endswith("key"):
        if prev in _PUBLIC_KEY_PREV or last in ("publickey", "pubkey"):
            return None
        if last == "apikey" or (last == "key" and prev == "api"):
            return ("secret", vendor or "api_key")
        if last.endswith(_COMPOUND_STRONG_KEYS) or (last == "key" and prev in _STRONG_KEY_PREV):
            return ("secret", vendor or "secret")
        return ("weak", vendor or "high_entropy")
    return None


def _vendor_kind(joined: str) -> str | None:
    if ("aws" in joined and "secret" in joined) or joined.endswith("secretaccesskey"):
        return "aws_secret_key"
    if joined.startswith(("dd", "datadog")) and joined.endswith(("apikey", "appkey")):
        return "datadog_key"
    if "okta" in joined:
        return "okta_token"
    if "heroku" in joined:
        return "heroku_key"
    if "twilio" in joined:
        return "twilio_auth_token"
    return None


def _is_secret_field(key: str) -> bool:
    """Whether a dict key names a secret (``password``, ``GITHUB_TOKEN``, ``apiKey``, ...)."""
    if len(key) > 200:
        return False
    if "_".join(_name_words(key)) in _DICT_ONLY_SECRET_NAMES:
        return True
    cls = _classify_name(key)
    return cls is not None and cls[0] != "weak"


# ---------------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------------

_Replacer = Callable[["re.Match[str]"], "str | None"]
_Resume = Callable[["re.Match[str]"], int]
_Locate = Callable[[str], Callable[[int], int]]


class _Rule(NamedTuple):
    """One detector.

    ``replace`` returns the replacement for a whole match, or ``None`` to decline it; after a
    declined match the search goes on at ``resume(match)`` (default: one character later).
    ``hints`` are lower-case substrings, one of which must occur for the rule to run at all.
    ``locate(lowered)`` returns a function mapping a (non-decreasing) ``pos`` to the next
    candidate position ``>= pos`` in the lower-case text (or -1) where the regex is tried with
    ``match`` instead of a full ``search``: much faster for case-insensitive patterns, which
    get no literal-prefix scan from the regex engine.
    """

    kind: str
    regex: _Lazy
    hints: tuple[str, ...]
    replace: _Replacer
    resume: _Resume | None = None
    locate: _Locate | None = None


def _mask(target: str, kind: str) -> str | None:
    """``target`` with everything except existing markers (and blanks) masked; None if same."""
    if not target:
        return None
    if "[" not in target or _MARKER_RE.search(target) is None:
        return marker(kind)
    pieces: list[str] = []
    changed = False
    last = 0
    for mm in _MARKER_RE.finditer(target):
        segment = target[last : mm.start()]
        if segment.strip():
            pieces.append(marker(kind))
            changed = True
        else:
            pieces.append(segment)
        pieces.append(mm.group())
        last = mm.end()
    segment = target[last:]
    if segment.strip():
        pieces.append(marker(kind))
        changed = True
    else:
        pieces.append(segment)
    return "".join(pieces) if changed else None


def _redact_group(m: re.Match[str], group: int | str, kind: str) -> str | None:
    """The match with ``group`` masked as ``kind``, or ``None`` if nothing changes."""
    new = _mask(m.group(group), kind)
    if new is None:
        return None
    start, end = m.span(group)
    base = m.start()
    whole = m.group(0)
    return whole[: start - base] + new + whole[end - base :]


def _resume_at_end(m: re.Match[str]) -> int:
    return m.end()


def _anchors(*literals: str) -> _Locate:
    """A locator for the positions where one of the lower-case ``literals`` starts."""

    def locate(lowered: str) -> Callable[[int], int]:
        nxt = dict.fromkeys(literals, -2)  # cached next occurrence; -2: not searched yet

        def find(pos: int) -> int:
            best = -1
            for lit in literals:
                i = nxt[lit]
                if i == -2 or (0 <= i < pos):
                    i = nxt[lit] = lowered.find(lit, pos)
                if i >= 0 and (best < 0 or i < best):
                    best = i
            return best

        return find

    return locate


def _simple(
    kind: str,
    pattern: str,
    hints: Sequence[str],
    *,
    group: int | str = 0,
    flags: int = 0,
    check: Callable[[str], bool] | None = None,
    anchors: Sequence[str] = (),
) -> _Rule:
    """A rule masking ``group`` of every match as ``[REDACTED:kind]``.

    With ``anchors`` (lower-case literals), every match must start with one of them.
    """

    def replace(m: re.Match[str]) -> str | None:
        if check is not None and not check(m.group(group)):
            return None
        return _redact_group(m, group, kind)

    locate = _anchors(*anchors) if anchors else None
    return _Rule(kind, _Lazy(pattern, flags), tuple(hints), replace, None, locate)


_TOK_CHARS = r"A-Za-z0-9_\-"


def _prefixed(
    kind: str,
    prefixes: Sequence[str],
    body: str,
    *,
    before: str = _TOK_CHARS,
    after: str | None = _TOK_CHARS,
    check: Callable[[str], bool] | None = None,
    hints: Sequence[str] | None = None,
) -> _Rule:
    """A token that starts with one of ``prefixes`` (literal) followed by ``body``.

    The token must not be preceded by a ``before`` character nor followed by an ``after``
    character. The look-behind is placed *after* the literal prefix so that the regex engine
    can use its fast literal/charset prefix scan.
    """
    branches = "|".join(f"{re.escape(p)}(?<![{before}]{re.escape(p)})" for p in prefixes)
    pattern = f"(?:{branches}){body}" + (f"(?![{after}])" if after else "")
    return _simple(kind, pattern, [h.lower() for h in (hints or prefixes)], check=check)


def _has_digit(value: str) -> bool:
    return _DIGIT_RE.search(value) is not None


def _has_digit_and_alpha(value: str) -> bool:
    return _has_digit(value) and _ALPHA_RE.search(value) is not None


_PEM = (
    r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"[A-Za-z0-9+/=\s\\:,.()\-]*?"
    r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"|(?=[^A-Za-z0-9+/=\s\\:,.()\-])|\Z)"
)

_FORMAT_RULES: Final[tuple[_Rule, ...]] = (
    # --- private keys: the whole block ------------------------------------------------------
    _simple("private_key", _PEM, ["private key"]),
    _simple(
        "private_key",
        r"Private-Lines:[ \t]*\d{1,4}[ \t]*\r?\n(?:[A-Za-z0-9+/=]{1,128}(?:\r?\n|\Z)){1,400}",
        ["private-lines"],
    ),
    _prefixed("age_secret_key", ["AGE-SECRET-KEY-1"], r"[02-9AC-HJ-NP-Z]{58}"),
    # --- JWT --------------------------------------------------------------------------------------
    _prefixed(
        "jwt",
        ["eyJ"],
        r"[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{2,}\.[A-Za-z0-9_\-]*",
        after=None,
    ),
    # --- AI providers -----------------------------------------------------------------------------
    _prefixed("anthropic_key", ["sk-ant-"], r"[A-Za-z0-9_\-]{20,}", after=None),
    _prefixed("openrouter_key", ["sk-or-v1-"], r"[A-Za-z0-9]{32,128}"),
    _prefixed(
        "openai_key",
        ["sk-proj-", "sk-svcacct-", "sk-admin-", "sk-None-"],
        r"[A-Za-z0-9_\-]{20,}",
        after=None,
    ),
    _prefixed("openai_key", ["sk-"], r"[A-Za-z0-9]{20,200}", check=_has_digit_and_alpha),
    _prefixed("huggingface_token", ["hf_", "api_org_"], r"[A-Za-z0-9]{30,40}"),
    _prefixed("replicate_token", ["r8_"], r"[A-Za-z0-9]{37}"),
    _prefixed("groq_key", ["gsk_"], r"[A-Za-z0-9]{48,56}"),
    _prefixed("xai_key", ["xai-"], r"[A-Za-z0-9]{70,90}"),
    _prefixed("perplexity_key", ["pplx-"], r"[A-Za-z0-9]{40,56}"),
    _prefixed("langsmith_key", ["lsv2_pt_", "lsv2_sk_"], r"[a-f0-9]{32}_[a-f0-9]{10}"),
    # --- code hosting / package registries --------------------------------------------------------
    # (a hyphen may precede these: "deploy-ghp_..." is still a token, the prefixes are distinctive)
    _prefixed(
        "github_token",
        ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        r"[A-Za-z0-9]{30,251}",
        before=r"A-Za-z0-9_",
    ),
    _prefixed("github_token", ["github_pat_"], r"[A-Za-z0-9_]{40,255}", before=r"A-Za-z0-9_"),
    _prefixed(
        "gitlab_token",
        ["glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glft-", "glsoat-", "gloas-", "glimt-"],
        r"[A-Za-z0-9_\-]{20,}",
        after=None,
    ),
    _prefixed("gitlab_token", ["GR1348941"], r"[A-Za-z0-9_\-]{20,60}"),
    _prefixed("npm_token", ["npm_"], r"[A-Za-z0-9]{36}"),
    _prefixed("pypi_token", ["pypi-Ag"], r"[A-Za-z0-9_\-]{50,}", after=None),
    # --- chat / messaging -------------------------------------------------------------------------
    _prefixed(
        "slack_token",
        ["xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-", "xoxe.xoxp-"],
        r"[A-Za-z0-9\-]{10,}",
        after=None,
        hints=["xox"],
    ),
    _prefixed("slack_token", ["xapp-"], r"\d-[A-Za-z0-9\-]{10,}", after=None),
    _simple(
        "slack_webhook",
        r"(hooks\.slack\.com/(?:services|workflows|triggers)/)([A-Za-z0-9_/\-]{10,})",
        ["hooks.slack.com"],
        group=2,
    ),
    _simple(
        "discord_webhook",
        r"(discord(?:app)?\.com/api/webhooks/\d{5,30}/)([A-Za-z0-9_\-]{30,})",
        ["discord"],
        group=2,
    ),
    _simple(
        "discord_token",
        r"[MNO](?<![A-Za-z0-9_\-.][MNO])[A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6,7}"
        r"\.[A-Za-z0-9_\-]{27,40}(?![A-Za-z0-9_\-.])",
        ["."],
        check=_has_digit,
    ),
    _simple(
        "telegram_token",
        r"(?:(?<=bot)|(?<![A-Za-z0-9_:]))\d{6,12}:AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])",
        [":aa"],
    ),
    # --- cloud ------------------------------------------------------------------------------------
    _prefixed("aws_access_key", ["AKIA", "ASIA", "ABIA", "ACCA"], r"[A-Z0-9]{16}"),
    _prefixed("gcp_api_key", ["AIza"], r"[A-Za-z0-9_\-]{35}"),
    _prefixed("google_oauth_secret", ["GOCSPX-"], r"[A-Za-z0-9_\-]{28}"),
    _prefixed("google_oauth_token", ["ya29."], r"[A-Za-z0-9_\-]{20,}", after=None),
    _simple(
        "azure_storage_key",
        r"(?i)(?:AccountKey|SharedAccessKey)[ \t]*=[ \t]*([A-Za-z0-9+/]{20,}={0,2})",
        ["accountkey", "sharedaccesskey"],
        group=1,
        anchors=["accountkey", "sharedaccesskey"],
    ),
    _simple("azure_sas", r"([?&;]sig=)([A-Za-z0-9%+/=]{20,})", ["sig="], group=2),
    _simple(
        "azure_client_secret",
        r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])",
        ["q~"],
    ),
    _prefixed("digitalocean_token", ["dop_v1_", "doo_v1_", "dor_v1_"], r"[a-f0-9]{64}"),
    _prefixed("heroku_key", ["HRKU-"], r"[A-Za-z0-9_\-]{40,80}"),
    _prefixed("databricks_token", ["dapi"], r"[a-f0-9]{32}(?:-\d)?"),
    _prefixed("vault_token", ["hvs.", "hvb.", "hvr."], r"[A-Za-z0-9_\-]{24,}", after=None),
    _prefixed(
        "doppler_token",
        ["dp.pt.", "dp.st.", "dp.sa.", "dp.ct.", "dp.scim.", "dp.audit."],
        r"[A-Za-z0-9_.\-]{30,}",
        after=None,
    ),
    _simple(
        "terraform_token",
        r"(?<![A-Za-z0-9])[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{60,120}",
        ["atlasv1"],
    ),
    _prefixed("pulumi_token", ["pul-"], r"[a-f0-9]{40}"),
    _prefixed("dynatrace_token", ["dt0c01."], r"[A-Z0-9]{24}\.[A-Z0-9]{64}"),
    _prefixed("supabase_token", ["sbp_"], r"[a-f0-9]{40}"),
    _prefixed(
        "planetscale_token",
        ["pscale_tkn_", "pscale_pw_", "pscale_oauth_"],
        r"[A-Za-z0-9_\-.]{32,}",
        after=None,
    ),
    _prefixed("flyio_token", ["fo1_"], r"[A-Za-z0-9_\-]{43}"),
    _prefixed("onepassword_token", ["ops_eyJ"], r"[A-Za-z0-9+/=_\-]{100,}", after=None),
    # --- SaaS -------------------------------------------------------------------------------------
    _prefixed(
        "stripe_key",
        ["sk_live_", "sk_test_", "rk_live_", "rk_test_", "pk_live_", "pk_test_"],
        r"[A-Za-z0-9]{10,247}",
    ),
    _prefixed("stripe_webhook_secret", ["whsec_"], r"[A-Za-z0-9+/=]{20,}", after=None),
    _prefixed(
        "sendgrid_key",
        ["SG."],
        r"[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{30,50}",
        before=r"A-Za-z0-9_\-.",
    ),
    _prefixed("twilio_api_key", ["SK"], r"[0-9a-fA-F]{32}", before="A-Za-z0-9", after="A-Za-z0-9"),
    _prefixed("twilio_account_sid", ["AC"], r"[0-9a-f]{32}", before="A-Za-z0-9", after="A-Za-z0-9"),
    _prefixed("mailgun_key", ["key-"], r"[0-9a-zA-Z]{32}"),
    _simple(
        "mailchimp_key",
        r"[0-9a-f](?<![A-Za-z0-9].)[0-9a-f]{31}-us\d{1,2}(?![A-Za-z0-9])",
        ["-us"],
    ),
    _prefixed("shopify_token", ["shpat_", "shpss_", "shpca_", "shppa_"], r"[a-fA-F0-9]{32}"),
    _prefixed("square_token", ["sq0atp-", "sq0csp-", "sq0idp-"], r"[A-Za-z0-9_\-]{22,60}"),
    _prefixed("square_token", ["EAAA"], r"[A-Za-z0-9_\-]{56,64}"),
    _prefixed("linear_key", ["lin_api_", "lin_oauth_"], r"[A-Za-z0-9]{32,64}"),
    _prefixed("notion_token", ["secret_", "ntn_"], r"[A-Za-z0-9]{40,50}", check=_has_digit),
    _prefixed("atlassian_token", ["ATATT", "ATCTT"], r"[A-Za-z0-9_\-=]{50,}", after=None),
    _prefixed("postman_key", ["PMAK-"], r"[0-9a-f]{24}-[0-9a-f]{34}"),
    _prefixed("grafana_token", ["glsa_"], r"[A-Za-z0-9]{32}_[0-9a-f]{8}"),
    _prefixed("grafana_token", ["glc_"], r"[A-Za-z0-9+/=]{32,}", after=None),
    _prefixed("newrelic_key", ["NRAK-", "NRII-", "NRJS-"], r"[A-Za-z0-9]{19,40}"),
    _prefixed(
        "sentry_token", ["sntrys_", "sntryu_", "sntrya_"], r"[A-Za-z0-9+/=_\-]{40,}", after=None
    ),
    _prefixed("figma_token", ["figd_"], r"[A-Za-z0-9_\-]{40,}", after=None),
)


# --- context rules ---------------------------------------------------------------------------

_URL_CRED_RE: Final = _Lazy(
    r"://(?P<user>[^\s:/@?#'\"<>\[\]\\]*):"
    r"(?P<pw>[^\s/?#'\"<>\[\]\\]+)(?=@[^\s@/?#'\"<>\\])"
)


_URL_PLACEHOLDER_PASSWORDS: Final = _words("pass password passwd pwd pw secret token key apikey")


def _url_replace(m: re.Match[str]) -> str | None:
    pw = m.group("pw")
    if _is_placeholder(pw) or pw.lower() in _URL_PLACEHOLDER_PASSWORDS:
        return None  # "https://user:pass@host" in documentation
    return _redact_group(m, "pw", "url_credentials")


_AUTH_SCHEMES: Final = {"bearer": "bearer_token", "basic": "basic_auth"}
_AUTH_SCHEME_RE: Final = _Lazy(
    r"(?i)bearer|basic|token|digest|negotiate|ntlm|ssws|bot|apikey|api-key|key"
    r"|aws4-hmac-sha256|hmac|dpop|sharedaccesssignature|otp"
)
_AUTH_RE: Final = _Lazy(
    r"(?i)authorization(?<![A-Za-z0-9_]authorization)\\?[\"']?[ \t]*[:=][ \t]*"
    r"(?:[rbfu]{1,2}(?=[\"']))?(?P<q>\\?[\"'])?[ \t]*"
    r"(?:(?P<scheme>bearer|basic|token|digest|negotiate|ntlm|ssws|bot|apikey|api-key|key"
    r"|aws4-hmac-sha256|hmac|dpop|sharedaccesssignature|otp)[ \t]+)?"
    r"(?P<v>[^\s\"'`\\,;()\[\]{}<>]{4,})"
)


def _auth_replace(m: re.Match[str]) -> str | None:
    value = m.group("v")
    if _is_placeholder(value) or value.startswith(("$", "%")):
        return None
    scheme = (m.group("scheme") or "").lower()
    if not scheme and _AUTH_SCHEME_RE.fullmatch(value):
        return None  # "Bearer {token}": the scheme, then a template
    if (
        not scheme
        and m.group("q") is None
        and _IDENT_CHAIN_RE.fullmatch(value)
        and ("." in value or "_" in value or not _secret_shaped(value) or _names_a_secret(value))
    ):
        return None  # code: {"Authorization": auth_header}
    return _redact_group(m, "v", _AUTH_SCHEMES.get(scheme, "authorization"))


_COOKIE_ATTRS: Final = _words(
    "path domain expires max-age samesite secure httponly priority partitioned version comment"
)


_COOKIE_NAME_RE: Final = _Lazy(r"[A-Za-z0-9!#$%&'*+.^_`|~\-]{1,200}")


def _redact_cookie_list(value: str) -> str:
    out = []
    for part in value.split(";"):
        name, eq, val = part.partition("=")
        clean = val.strip()
        if (
            not eq
            or not clean
            or _COOKIE_NAME_RE.fullmatch(name.strip()) is None
            or name.strip().lower() in _COOKIE_ATTRS
            or _is_placeholder(clean)
        ):
            out.append(part)
        else:
            lead = val[: len(val) - len(val.lstrip())]
            trail = val[len(val.rstrip()) :]
            out.append(f"{name}={lead}{marker('cookie')}{trail}")
    return ";".join(out)


def _cookie_replace(m: re.Match[str]) -> str | None:
    group = "v" if m.group("v") is not None else "qv"
    value = m.group(group)
    new = _redact_cookie_list(value)
    if new == value:
        return None
    start, end = m.span(group)
    base = m.start()
    return m.group(0)[: start - base] + new + m.group(0)[end - base :]


_COOKIE_HEADER_RE: Final = _Lazy(
    r"(?i)cookie(?<![A-Za-z0-9_]cookie)\\?[\"']?[ \t]*:[ \t]*\\?[\"']?"
    r"(?P<v>[^\r\n\"'\\]+)(?P<qv>)"  # to the end of the header: no backtracking
)
_CURL_COOKIE_RE: Final = _Lazy(
    r"(?:-b(?<![A-Za-z0-9_\-]-b)|--cookie(?<![A-Za-z0-9_\-]--cookie))(?:[ \t]+|=)"
    r"(?:(?P<q>[\"'])(?P<qv>[^\"'\r\n]{1,8000})(?P=q)|(?P<v>[^\s\"']+))"
)

_CURL_USER_RE: Final = _Lazy(
    r"(?:-u(?<![A-Za-z0-9_\-]-u)|-U(?<![A-Za-z0-9_\-]-U)|--user(?<![A-Za-z0-9_\-]--user)"
    r"|--proxy-user(?<![A-Za-z0-9_\-]--proxy-user))(?:[ \t]+|=)[\"']?"
    r"(?P<user>[^\s:\"'\[\]]{1,256}):(?P<pw>[^\s\"'\[\]]+)"
)


def _curl_user_replace(m: re.Match[str]) -> str | None:
    pw = m.group("pw")
    if _is_placeholder(pw) or pw.startswith("$") or (pw.isdigit() and m.group("user").isdigit()):
        return None
    return _redact_group(m, "pw", "password")


_BEARER_RE: Final = r"(?i)bearer(?<![A-Za-z0-9_\-]bearer)[ \t]+(?P<v>[A-Za-z0-9\-._~+/]{20,}=*)"
_CLI_VALUE = r"(?P<q>[\"']?)(?P<v>[^\s\"']+)(?P=q)"
_MYSQL_RE: Final = (
    r"(?i)mysql(?<![A-Za-z0-9_\-]mysql)(?:dump|admin|import|sh|check|slap)?\b"
    r"[^\n]{0,300}?[ \t](?-i:-p)" + _CLI_VALUE
)
_LOGIN_TOOLS: Final = ("docker", "podman", "buildah", "skopeo", "helm", "oras", "nerdctl", "crane")
_LOGIN_RE: Final = (
    r"(?i)(?:"
    + "|".join(f"{t}(?<![A-Za-z0-9_\\-]{t})" for t in _LOGIN_TOOLS)
    + r")[ \t]+(?:registry[ \t]+)?login\b[^\n]{0,300}?[ \t](?-i:-p)[ \t]*"
    + _CLI_VALUE
)
_SSHPASS_RE: Final = r"(?i)sshpass(?<![A-Za-z0-9_\-]sshpass)[ \t]+(?-i:-p)[ \t]*" + _CLI_VALUE


def _cli_value_replace(m: re.Match[str]) -> str | None:
    value = m.group("v")
    if _is_placeholder(value) or value.startswith("$"):
        return None
    return _redact_group(m, "v", "password")


def _tool(name: str) -> str:
    """``name`` as a command word: not the tail of another word or path."""
    return f"{name}(?<![A-Za-z0-9_\\-]{name})"


# Credential flags of other command-line tools (the value follows the flag, as in mysql -p).
_HTTPIE_TOOLS: Final = ("http", "https", "xh", "xhs")
_HTTPIE_RE: Final = (
    "(?:" + "|".join(_tool(t) for t in _HTTPIE_TOOLS) + ")"
    r"[ \t](?:[^\n]{0,300}?[ \t])?(?:-a|--auth)(?:[ \t]+|=)[\"']?"
    r"(?P<user>[^\s:\"'\[\]]{1,256}):(?P<pw>[^\s\"'\[\]]+)"
)
_SQLCMD_TOOLS: Final = ("sqlcmd", "bcp", "osql", "isql")
# A flag's value: quoted (spaces allowed) or a bare word.
_CLI_ANY: Final = (
    r"(?:\"(?P<dq>[^\"\n]{1,200})\"|'(?P<sq>[^'\n]{1,200})'|(?P<uq>[^\s\"'|;&]{1,200}))"
)
_SQLCMD_RE: Final = (
    "(?:" + "|".join(_tool(t) for t in _SQLCMD_TOOLS) + r")\b[^\n]{0,300}?[ \t]-P[ \t]*"
) + _CLI_ANY
_LDAP_RE: Final = (
    _tool("ldap")
    + r"(?:search|modify|add|delete|whoami|passwd|compare|modrdn|exop|url)\b"
    + r"[^\n]{0,300}?[ \t]-w[ \t]*"
    + _CLI_ANY
)
_OPENSSL_RE: Final = _tool("openssl") + r"\b[^\n]{0,300}?[ \t]-k[ \t]+" + _CLI_ANY
_PASS_ARG_RE: Final = (
    r"-pass(?:in|out|word)?(?<![A-Za-z0-9_\-]-pass)(?<![A-Za-z0-9_\-]-passin)"
    r"(?<![A-Za-z0-9_\-]-passout)(?<![A-Za-z0-9_\-]-password)[ \t]+[\"']?pass:"
    r"(?P<v>[^\s\"']+)"
)
_SMB_USER_RE: Final = (
    r"(?:-U|--user|--username)(?<![A-Za-z0-9_\-]-U)(?<![A-Za-z0-9_\-]--user)"
    r"(?<![A-Za-z0-9_\-]--username)(?:[ \t]+|=)[\"']?"
    r"(?P<user>[^\s%\"'\[\]]{1,256})%(?P<v>[^\s\"'\[\]]+)"
)
_HTPASSWD_RE: Final = (
    _tool("htpasswd")
    + r"(?P<flags>(?:[ \t]+-[A-Za-z]{1,8}(?:[ \t]+\d{1,3})?){1,6})"
    + r"[ \t]+(?P<a>[^\s\-|;&][^\s|;&]*)[ \t]+(?P<b>[^\s|;&]+)(?:[ \t]+(?P<c>[^\s|;&]+))?"
)
_STDIN_READERS: Final = (
    r"(?:--password-stdin|--passphrase-fd|chpasswd|passwd[ \t]+--stdin"
    r"|sudo(?:[ \t]+-[A-Za-z]+)*?[ \t]+-[A-Za-z]*S)(?![A-Za-z])"
)
_ECHO_PIPE_RE: Final = (
    r"(?:echo|printf)(?<![A-Za-z0-9_\-]echo)(?<![A-Za-z0-9_\-]printf)[ \t]+(?:-[neE]{1,3}[ \t]+)?"
    r"(?:\"(?P<dq>[^\"\n]{1,200})\"|'(?P<sq>[^'\n]{1,200})'|(?P<uq>[^\s\"'|;&]{1,200}))"
    r"[ \t]*\|(?=[^\n|]{0,300}?" + _STDIN_READERS + ")"
)
_HERE_STRING_RE: Final = (
    _STDIN_READERS
    + r"[^\n]{0,300}?<<<[ \t]*(?:\"(?P<dq>[^\"\n]{1,200})\"|'(?P<sq>[^'\n]{1,200})'"
    + r"|(?P<uq>[^\s\"'|;&]{1,200}))"
)
_AWS_CONFIGURE_RE: Final = (
    _tool("aws")
    + r"[ \t]+configure[ \t]+set[ \t]+(?:[A-Za-z0-9_.\-]{1,60}\.)?"
    + r"(?P<name>aws_secret_access_key|aws_session_token|aws_security_token)[ \t]+"
    + _CLI_VALUE
)


def _piped_value_replace(m: re.Match[str]) -> str | None:
    group = m.lastgroup or "uq"
    value = m.group(group)
    if _is_placeholder(value) or value.startswith(("$", "%")):
        return None
    return _redact_group(m, group, "password")


def _smb_user_replace(m: re.Match[str]) -> str | None:
    value = m.group("v")
    if _is_placeholder(value) or value.startswith(("$", "%")):
        return None
    return _redact_group(m, "v", "password")


def _htpasswd_replace(m: re.Match[str]) -> str | None:
    letters = "".join(c for c in m.group("flags") if c.isalpha())
    if "b" not in letters:
        return None  # the password is prompted for
    group = "b" if "n" in letters else "c"  # -n: no file, "user password"
    value = m.group(group)
    if value is None or _is_placeholder(value) or value.startswith("$"):
        return None
    return _redact_group(m, group, "password")


def _aws_configure_replace(m: re.Match[str]) -> str | None:
    value = m.group("v")
    if _is_placeholder(value) or value.startswith("$"):
        return None
    kind = "aws_secret_key" if m.group("name") == "aws_secret_access_key" else "token"
    return _redact_group(m, "v", kind)


def _bare_replace(m: re.Match[str]) -> str | None:
    found = classify_bare(m.string, m.start(), m.end())
    if found is None:
        return None
    offset, kind = found
    return m.group()[: offset - m.start()] + marker(kind)


_NETRC_RE: Final = _Lazy(
    r"login(?<![A-Za-z0-9_\-]login)[ \t]+[^\s]{1,200}[ \t]+password[ \t]+(?P<v>[^\s]+)"
)


def _netrc_replace(m: re.Match[str]) -> str | None:
    if _is_placeholder(m.group("v")):
        return None
    return _redact_group(m, "v", "password")


# --- assignments to secret-looking names -----------------------------------------------------

# Name endings that may denote a secret; the final decision is made by _classify_name.
_KW_ENDINGS: Final = tuple(
    sorted(
        _words(
            """password passwd passphrase pass pwd secret token key credential credentials creds
            sessionid sessid connection_string connectionstring connection-string conn_str
            connstr _base _base64 _b64 -base64 -b64"""
        )
    )
)
_KW_LOOKBEHIND = "(?:" + "|".join(f"(?<={re.escape(e)})" for e in _KW_ENDINGS) + ")"
_NAME_CHARS = r"A-Za-z0-9_.\-"
_NAME_CHARSET: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")
_MAX_NAME: Final = 80
_ASSIGN_RE: Final = _Lazy(
    rf"(?<![{_NAME_CHARS}])(?<!::)"
    r"(?P<dash>-{1,2})?"
    rf"(?P<name>[A-Za-z0-9_.][{_NAME_CHARS}]{{0,{_MAX_NAME - 1}}})(?![{_NAME_CHARS}])"
    + _KW_LOOKBEHIND
    + r"(?P<sep>(?:\\?[\"'])?[ \t]*(?::=|=>|==|=|:)[ \t]*"
    r"|(?(dash)[ \t]+|[ \t]+(?=[A-Za-z0-9+/=_\-.~]{20})))"
    r"(?:\\?\"(?P<dq>(?:[^\"\\\n]|\\[^\"\n]){3,})\\?\""
    r"|\\?'(?P<sq>(?:[^'\\\n]|\\[^'\n]){3,})\\?'"
    r"|`(?P<bq>[^`\n]{3,})`"
    r"|(?P<uq>[^\s\"'`,;&<>\\(){}\[\]][^\s\"'`,;&<>\\(){}\[\]]{2,})(?<!:))",
    re.IGNORECASE,
)


_KW_END_RE: Final = _Lazy(
    "(?:" + "|".join(re.escape(e) for e in sorted(_KW_ENDINGS, key=len, reverse=True)) + ")"
    r"(?![a-z0-9_.\-])"
)
_SEP_STARTS: Final = frozenset(["=", ":", '"', "'", "\\", " ", "\t"])
_VALUE20_RE: Final = _Lazy(r"[a-z0-9+/=_\-.~]{20}")


def _locate_assignments(lowered: str) -> Callable[[int], int]:
    """Locator for name tokens that end with a secret-ish word (see ``_KW_ENDINGS``)."""
    return functools.partial(_next_assignment, lowered, _KW_END_RE.get().search)


def _next_assignment(
    lowered: str, search: Callable[[str, int], re.Match[str] | None], pos: int
) -> int:
    """Start of the next name token ``>= pos`` ending with a secret-ish word, or -1."""
    n = len(lowered)
    i = pos
    while True:
        m = search(lowered, i)
        if m is None:
            return -1
        end = i = m.end()
        after = lowered[end : end + 1]
        if after not in _SEP_STARTS:
            continue  # cheap pre-check: no separator can follow
        start = end - len(m.group())
        lo = max(pos, end - _MAX_NAME - 1)
        while start > lo and lowered[start - 1] in _NAME_CHARSET:
            start -= 1
        if start > 0 and lowered[start - 1] in _NAME_CHARSET:
            continue  # the token started before ``pos`` or is too long to be a name
        if after in " \t" and lowered[start] != "-":
            j = end
            while j < n and j < end + 40 and lowered[j] in " \t":
                j += 1
            if lowered[j : j + 1] not in ("=", ":") and _VALUE20_RE.match(lowered, j) is None:
                continue  # "name value" needs a 20-char value unless it is a CLI flag
        return start


_XML_RE: Final = _Lazy(
    rf"<(?P<name>[{_NAME_CHARS}:]{{1,60}})(?![{_NAME_CHARS}:]){_KW_LOOKBEHIND}>"
    r"(?P<v>[^<\n]+)</(?P=name)>",
    re.IGNORECASE,
)
_MIN_LEN: Final = {"password": 3, "secret": 8, "weak": 20}
_BLANKS_RE: Final = _Lazy(r"[ \t]*")


def _at_eol(text: str, pos: int) -> bool:
    """Whether only blanks, or a ``#``/``;`` comment, follow ``pos`` on its line."""
    first = text[pos : pos + 1]
    if first not in (" ", "\t"):
        return first in ("", "\r", "\n", "#", ";")
    blank = _BLANKS_RE.match(text, pos)
    j = blank.end() if blank is not None else pos
    return j >= len(text) or text[j] in "\r\n#;"


@functools.lru_cache(maxsize=4096)
def _accept_value(
    tier: str,
    name: str,
    sep: str,
    value: str,
    quoted: bool,
    following: str,
    at_eol: bool,
    after_colon: bool,
    tuple_target: bool,
) -> bool:
    """Whether ``value``, assigned to secret-looking ``name``, is a literal secret.

    The context is summarised by the arguments after ``quoted`` (the character after the
    value, whether the line ends there, whether the name follows ``:``, whether it is part of
    a tuple on the left of ``=``), so that decisions can be cached.
    """
    if len(value) < _MIN_LEN[tier]:
        return False
    if tier == "weak":
        return (
            _highshannon(value)
            and not _is_placeholder(value)
            and not _names_a_secret(value)
            and (quoted or not _is_code_reference(value, name, sep, following))
        )
    if tier == "secret" and not _secret_shaped(value):
        return False
    if len(value.split()) > 4:
        return False  # a sentence ("The password for the admin account."), not a passphrase
    if _is_placeholder(value) or _names_a_secret(value):
        return False
    stripped_sep = sep.strip(" \t\\\"'")
    if not stripped_sep:  # "name value": only CLI flags or unmistakable secrets
        if not name.startswith("-"):
            return _highshannon(value)
        if value.lower() in _PROSE_WORDS or _METAVAR_RE.fullmatch(value):
            return False  # "--password options", "--password TEXT" (help output)
    if stripped_sep == ":" and not quoted and after_colon:
        return False  # "arn:aws:secretsmanager:...:secret:name", not an assignment
    if not quoted and "=" in stripped_sep and tuple_target:
        return False  # "username, password = auth": tuple unpacking in code
    if quoted:
        return True
    if _is_code_reference(value, name, sep, following):
        return False
    header_like = tier != "password" and "-" in name and not name.startswith("-")
    spaced_eq = "=" in stripped_sep and sep[:1] in " \t" and sep[-1:] in " \t"
    # "name: value" is YAML, or prose ("invalid token: expected ')'"); "name = value more" is
    # code ("password = await hash(p)"), while "name = value" alone on its line is INI.
    return not (
        ((stripped_sep == ":" and not header_like) or spaced_eq)
        and not at_eol
        and (spaced_eq or not _secret_shaped(value))
    )


def _tuple_target(text: str, start: int) -> bool:
    """Whether the name at ``start`` follows ``x,`` (tuple unpacking: ``user, password = t``)."""
    j = start - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    if j < 1 or text[j] != ",":
        return False
    j -= 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    return j >= 0 and (text[j].isalnum() or text[j] in "_.])")


def _assign_replace(m: re.Match[str]) -> str | None:
    text, start, end = m.string, m.start(), m.end()
    name = text[start : m.end("name")]  # with its leading dashes
    cls = _classify_name(name)
    if cls is None:
        return None
    tier, kind = cls
    group = m.lastgroup or "uq"  # the value is the last group of the pattern
    value = m.group(group)
    quoted = group != "uq"
    sep = m.group("sep")
    at_eol = tuple_target = False  # only computed when they matter (see _accept_value)
    if not quoted and (":" in sep or "=" in sep):
        at_eol = _at_eol(text, end)
        if "=" in sep:
            tuple_target = _tuple_target(text, start)
    decide = _accept_value if len(value) <= _MAX_CACHED else _accept_value.__wrapped__
    accept = decide(
        tier,
        name,
        sep,
        value,
        quoted,
        text[end : end + 1],
        at_eol,
        text[start - 1 : start] == ":",
        tuple_target,
    )
    return _redact_group(m, group, kind) if accept else None


def _assign_resume(m: re.Match[str]) -> int:
    # An unquoted value cannot contain another assignment worth finding; skip it (this keeps
    # chains like "key=key=key=..." linear). A quoted value may ("cmd: 'export TOKEN=...'").
    if m.lastgroup == "uq":
        return m.end()
    return m.start(m.lastgroup or 0)


def _xml_replace(m: re.Match[str]) -> str | None:
    cls = _classify_name(m.group("name"))
    value = m.group("v").strip()
    if cls is None:
        return None
    tier, kind = cls
    if len(value) < _MIN_LEN[tier] or _is_placeholder(value) or _names_a_secret(value):
        return None
    if tier == "weak" and not _highshannon(value):
        return None
    if tier == "secret" and not _secret_shaped(value):
        return None
    return _redact_group(m, "v", kind)


_KW_HINTS: Final = ("pass", "pwd", "secret", "token", "key", "cred", "sess", "conn", "_b")

_CONTEXT_RULES: Final[tuple[_Rule, ...]] = (
    _Rule("url_credentials", _URL_CRED_RE, ("://",), _url_replace, _resume_at_end),
    _Rule(
        "authorization",
        _AUTH_RE,
        ("authorization",),
        _auth_replace,
        _resume_at_end,
        _anchors("authorization"),
    ),
    _Rule(
        "cookie",
        _COOKIE_HEADER_RE,
        ("cookie",),
        _cookie_replace,
        _resume_at_end,
        _anchors("cookie"),
    ),
    _Rule(
        "cookie",
        _CURL_COOKIE_RE,
        ("-b", "--cookie"),
        _cookie_replace,
        _resume_at_end,
        _anchors("-b", "--cookie"),
    ),
    _Rule(
        "password",
        _CURL_USER_RE,
        ("-u", "--user", "--proxy-user"),
        _curl_user_replace,
        _resume_at_end,
        _anchors("-u", "--user", "--proxy-user"),
    ),
    _Rule(
        "password",
        _Lazy(_MYSQL_RE),
        ("mysql",),
        _cli_value_replace,
        None,
        _anchors("mysql"),
    ),
    _Rule(
        "password",
        _Lazy(_LOGIN_RE),
        _LOGIN_TOOLS,
        _cli_value_replace,
        None,
        _anchors(*_LOGIN_TOOLS),
    ),
    _Rule(
        "password",
        _Lazy(_SSHPASS_RE),
        ("sshpass",),
        _cli_value_replace,
        None,
        _anchors("sshpass"),
    ),
    _Rule("password", _NETRC_RE, ("login",), _netrc_replace, _resume_at_end, _anchors("login")),
    _Rule(
        "password",
        _Lazy(_HTTPIE_RE),
        ("-a", "--auth"),
        _curl_user_replace,
        _resume_at_end,
        _anchors("http", "xh"),
    ),
    _Rule(
        "password",
        _Lazy(_SQLCMD_RE),
        _SQLCMD_TOOLS,
        _piped_value_replace,
        None,
        _anchors(*_SQLCMD_TOOLS),
    ),
    _Rule("password", _Lazy(_LDAP_RE), ("ldap",), _piped_value_replace, None, _anchors("ldap")),
    _Rule(
        "password",
        _Lazy(_OPENSSL_RE),
        ("openssl",),
        _piped_value_replace,
        None,
        _anchors("openssl"),
    ),
    _Rule("password", _Lazy(_PASS_ARG_RE), ("pass:",), _cli_value_replace, None, _anchors("-pass")),
    _Rule(
        "password",
        _Lazy(_SMB_USER_RE),
        ("%",),
        _smb_user_replace,
        _resume_at_end,
        _anchors("-u", "--user"),
    ),
    _Rule(
        "password",
        _Lazy(_HTPASSWD_RE),
        ("htpasswd",),
        _htpasswd_replace,
        None,
        _anchors("htpasswd"),
    ),
    _Rule(
        "password",
        _Lazy(_ECHO_PIPE_RE),
        ("|",),
        _piped_value_replace,
        None,
        _anchors("echo", "printf"),
    ),
    _Rule("password", _Lazy(_HERE_STRING_RE), ("<<<",), _piped_value_replace),
    _Rule(
        "aws_secret_key",
        _Lazy(_AWS_CONFIGURE_RE),
        ("configure",),
        _aws_configure_replace,
        None,
        _anchors("aws"),
    ),
    _Rule("secret", _XML_RE, _KW_HINTS, _xml_replace, _resume_at_end),
    _Rule("secret", _ASSIGN_RE, _KW_HINTS, _assign_replace, _assign_resume, _locate_assignments),
    _simple("bearer_token", _BEARER_RE, ["bearer"], group="v", anchors=["bearer"]),
    # Last: bare high-entropy tokens anywhere (after the rules that know the token's kind).
    _Rule("high_entropy", _Lazy(BARE_TOKEN_PATTERN), (), _bare_replace, _resume_at_end),
)

_RULES: Final[tuple[_Rule, ...]] = _FORMAT_RULES + _CONTEXT_RULES

KINDS: Final[frozenset[str]] = frozenset(
    {r.kind for r in _RULES}
    | {
        "api_key",
        "token",
        "session_id",
        "high_entropy",
        "basic_auth",
        "bearer_token",
        "aws_secret_key",
        "datadog_key",
        "okta_token",
        "heroku_key",
        "twilio_auth_token",
        "secret_field",
        "custom",
    }
)
"""Every ``<kind>`` that can appear in a ``[REDACTED:<kind>]`` marker."""


def _lower(text: str) -> str:
    """``text.lower()`` with the same length (so that positions match)."""
    lowered = text.lower()
    if len(lowered) != len(text):  # only U+0130 lower-cases to two code points
        lowered = text.replace("\u0130", "i").lower()
    return lowered


def _apply(rule: _Rule, text: str, lowered: str) -> str:
    """Run one rule over ``text`` (``lowered`` is ``_lower(text)``)."""
    pieces: list[str] = []
    last = 0
    pos = 0
    locate = rule.locate(lowered) if rule.locate and len(lowered) == len(text) else None
    compiled = rule.regex.get()
    match = compiled.match
    search = compiled.search
    n = len(text)
    # Existing markers are never cut into: a match may contain whole markers, but may not start
    # or end inside one (this keeps redaction idempotent, even for arbitrary user patterns).
    spans: list[tuple[int, int]] | None = None  # computed on the first match only
    starts: list[int] = []
    while pos <= n:
        if locate is None:
            m = search(text, pos)
            if m is None:
                break
        else:
            start = locate(pos)
            if start < 0:
                break
            m = match(text, start)
            if m is None:
                pos = start + 1
                continue
        if spans is None:
            spans = [mm.span() for mm in _MARKER_RE.finditer(text)] if "[" in text else []
            starts = [a for a, _ in spans]
        if spans:
            k = bisect.bisect_right(starts, m.start()) - 1
            if k >= 0 and m.start() < spans[k][1] and m.start() > spans[k][0]:
                pos = spans[k][1]  # starts inside a marker: skip the marker
                continue
            k = bisect.bisect_left(starts, m.end()) - 1
            if k >= 0 and spans[k][0] < m.end() < spans[k][1]:
                pos = m.start() + 1  # ends inside a marker
                continue
        rep = rule.replace(m)
        if rep is None:
            nxt = rule.resume(m) if rule.resume is not None else m.start() + 1
            pos = max(nxt, m.start() + 1)
            continue
        pieces.append(text[last : m.start()])
        pieces.append(rep)
        last = m.end()
        pos = last if last > m.start() else last + 1
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


@functools.lru_cache(maxsize=64)
def _custom_rules(patterns: tuple[PatternLike, ...]) -> tuple[_Rule, ...]:
    rules = []
    for p in patterns:
        regex = _Lazy(p if isinstance(p, re.Pattern) else re.compile(p))
        group: int | str = "secret" if "secret" in regex.get().groupindex else 0

        def replace(m: re.Match[str], group: int | str = group) -> str | None:
            return _redact_group(m, group, "custom")

        rules.append(_Rule("custom", regex, (), replace))
    return tuple(rules)


def _active_rules(lowered: str, rules: Sequence[_Rule]) -> list[_Rule]:
    return [r for r in rules if not r.hints or any(h in lowered for h in r.hints)]


def redact(text: str, extra_patterns: Sequence[PatternLike] = ()) -> str:
    """Replace every secret in ``text`` by ``[REDACTED:<kind>]``, keeping the context.

    ``extra_patterns`` are additional regexes (source strings or compiled patterns) whose
    matches are replaced with ``[REDACTED:custom]``; if a pattern has a group named ``secret``
    only that group is replaced. Idempotent: ``redact(redact(x)) == redact(x)``.
    """
    if not isinstance(text, str) or not text:
        return text
    rules: Sequence[_Rule] = _RULES
    if extra_patterns:
        rules = _RULES + _custom_rules(tuple(extra_patterns))
    lowered = _lower(text)
    # Hints are checked once: redaction only inserts markers, and no match can start or end
    # inside a marker, so a rule without a hint in the input has nothing to find later either.
    active = _active_rules(lowered, rules)
    # Apply the rules in a cycle until every rule has seen the current text: one redaction can
    # enable another (a marker changes what surrounds a value), and this makes the result a
    # fixed point, hence ``redact`` idempotent. A rule has seen its own output, so after the
    # last change only the *other* rules run once more (normally all cheap no-ops).
    count = len(active)
    unchanged = 0
    for step in range(count * _MAX_PASSES):
        if unchanged >= count:
            break
        new = _apply(active[step % count], text, lowered)
        if new is text:
            unchanged += 1
        else:
            text = new
            lowered = _lower(text)
            unchanged = 1
    return text


def redact_identifier(text: str, extra_patterns: Sequence[PatternLike] = ()) -> str:
    """:func:`redact` for a value known to be an identifier (a key, a label, an id field):
    a uuid4 hex or a SHA in it is an id, not a bare secret; known formats still go."""
    if not isinstance(text, str) or not text:
        return text
    labelled = redact("id " + text, extra_patterns)
    return labelled[3:] if labelled.startswith("id ") else redact(text, extra_patterns)


def contains_secret(text: str, extra_patterns: Sequence[PatternLike] = ()) -> bool:
    """Whether :func:`redact` would change ``text``."""
    return redact(text, extra_patterns) != text


# ---------------------------------------------------------------------------------------------
# <private> spans
# ---------------------------------------------------------------------------------------------

_PRIVATE_TAG_RE: Final = _Lazy(r"<(/?)[ \t]*private(?:\s[^<>]{0,200})?>", re.IGNORECASE)


def strip_private(text: str) -> str:
    """Replace each ``<private>...</private>`` span by ``[PRIVATE]``.

    Tags are case-insensitive and may carry attributes; spans may cover several lines and
    nest (the span ends at the matching close tag). An unclosed ``<private>`` hides everything
    to the end of the text. A stray ``</private>`` without an opening tag is left as is.
    """
    if not isinstance(text, str) or "<" not in text or "private" not in text.lower():
        return text
    pieces: list[str] = []
    last = 0
    depth = 0
    start = 0
    for m in _PRIVATE_TAG_RE.finditer(text):
        closing = bool(m.group(1))
        if not closing:
            if depth == 0:
                start = m.start()
            depth += 1
        elif depth > 0:
            depth -= 1
            if depth == 0:
                pieces.append(text[last:start])
                pieces.append(PRIVATE)
                last = m.end()
    if depth > 0:
        pieces.append(text[last:start])
        pieces.append(PRIVATE)
        return "".join(pieces)
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


# ---------------------------------------------------------------------------------------------
# Size caps
# ---------------------------------------------------------------------------------------------

_ELLIPSIS: Final = "\u2026"
_MAX_TAIL: Final = 500


def _truncation_marker(removed: int) -> str:
    return f"{_ELLIPSIS}[truncated {removed} chars]{_ELLIPSIS}"


def _is_high_surrogate(ch: str) -> bool:
    return "\ud800" <= ch <= "\udbff"


def _is_low_surrogate(ch: str) -> bool:
    return "\udc00" <= ch <= "\udfff"


def _safe_head(text: str, n: int) -> int:
    """Largest cut ``<= n`` that does not split a surrogate pair."""
    if 0 < n < len(text) and _is_high_surrogate(text[n - 1]) and _is_low_surrogate(text[n]):
        return n - 1
    return n


def _safe_tail(text: str, n: int) -> int:
    """Largest tail length ``<= n`` that does not split a surrogate pair."""
    cut = len(text) - n
    if (
        n > 0
        and 0 < cut < len(text)
        and _is_low_surrogate(text[cut])
        and _is_high_surrogate(text[cut - 1])
    ):
        return n - 1
    return n


def cap(text: str, limit: int) -> str:
    """Cap ``text`` at ``limit`` characters.

    Longer text keeps its head and a short tail around a marker such as
    ``…[truncated 12345 chars]…`` (the count is the number of characters removed); the result
    is never longer than ``limit`` and never splits a surrogate pair. When ``limit`` is too
    small for the marker, the head is kept and ends with ``…``. Raises :class:`ValueError` if
    ``limit <= 0``.
    """
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be an int, got {type(limit).__name__}")
    if limit <= 0:
        raise ValueError(f"limit must be positive, got {limit}")
    n = len(text)
    if n <= limit:
        return text
    removed = n - limit
    while True:
        budget = limit - len(_truncation_marker(removed))
        if n - budget <= removed:
            break
        removed = n - budget
    if budget < 1:
        head = _safe_head(text, limit - 1)
        return text[:head] + _ELLIPSIS
    tail = _safe_tail(text, min(budget // 5, _MAX_TAIL))
    head = _safe_head(text, budget - tail)
    removed = n - head - tail
    return text[:head] + _truncation_marker(removed) + (text[n - tail :] if tail else "")


# ---------------------------------------------------------------------------------------------
# Composition
# ---------------------------------------------------------------------------------------------


def well_formed(text: str) -> str:
    """``text`` as UTF-8 can carry it: a lone surrogate (text decoded with ``surrogateescape``,
    a cut UTF-16 string) becomes U+FFFD, a pair written as two code units becomes its
    character. Storage, the full-text index and the embedding model's tokenizer all need it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def sanitize(
    text: str, *, limit: int | None = None, extra_patterns: Sequence[PatternLike] = ()
) -> str:
    """:func:`well_formed`, :func:`strip_private`, then :func:`redact`, then :func:`cap` (if
    ``limit`` is given).

    Redaction runs on the full text, so a cap can never cut a secret in half and leak a part.
    """
    out = redact(strip_private(well_formed(text)), extra_patterns)
    if limit is not None:
        out = cap(out, limit)
    return out


def _is_empty_value(value: object) -> bool:
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, (str, list, tuple, dict)):
        return len(value) == 0
    return False


def sanitize_obj(
    obj: object,
    *,
    limit_per_string: int | None = None,
    extra_patterns: Sequence[PatternLike] = (),
) -> object:
    """Sanitize JSON-like data recursively and return a new object.

    Every string (values and string keys) goes through :func:`sanitize`. A value under a key
    that names a secret (``password``, ``db_password``, ``GITHUB_TOKEN``, ``apiKey``,
    ``client_secret``, ``authorization``, ``cookie``, ...) becomes ``[REDACTED:secret_field]``
    unless it is empty, ``None`` or a bool. Dicts, lists and tuples keep their type (dict
    subclasses become ``dict``); other values are returned unchanged. Containers nested deeper
    than :data:`MAX_DEPTH` become ``"[TRUNCATED:depth]"``.
    """
    if limit_per_string is not None and limit_per_string <= 0:
        raise ValueError(f"limit_per_string must be positive, got {limit_per_string}")
    patterns = tuple(extra_patterns)
    secret = marker("secret_field")
    bare = marker("high_entropy")

    def clean_str(s: str, key: str = "") -> str:
        out = sanitize(s, limit=limit_per_string, extra_patterns=patterns)
        if bare in out and key and ID_KEY_RE.search(key) is not None:
            # An id or a hash under its key ({"by": "<uuid4 hex>"}): judged as an identifier.
            out = redact_identifier(strip_private(well_formed(s)), patterns)
            out = cap(out, limit_per_string) if limit_per_string is not None else out
        return out

    def walk(value: object, depth: int, key: str = "") -> object:
        if isinstance(value, str):
            return clean_str(value, key)
        if isinstance(value, dict):
            if depth >= MAX_DEPTH:
                return DEPTH_MARKER
            out: dict[object, object] = {}
            for k, v in value.items():
                if isinstance(k, str):
                    new_key: object = clean_str(k)
                    if _is_secret_field(k) and not _is_empty_value(v):
                        out[new_key] = secret
                        continue
                else:
                    new_key = k
                out[new_key] = walk(v, depth + 1, k if isinstance(k, str) else "")
            return out
        if isinstance(value, (list, tuple)):
            if depth >= MAX_DEPTH:
                return DEPTH_MARKER
            items = [walk(v, depth + 1, key) for v in value]
            return tuple(items) if isinstance(value, tuple) else items
        return value

    return walk(obj, 0)
