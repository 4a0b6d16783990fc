"""All of Mimir's settings in one place, read from ``MIMIR_*`` environment variables.

Adapters build a :class:`MimirSettings` and hand its values to the core; core classes never read
the environment themselves (except :class:`~mimir_core.memory.Mimir` filling arguments left at
``None`` from these settings, which is documented there).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from .errors import ConfigError, short

ENV_PREFIX = "MIMIR_"


def valid_half_life(days: float) -> bool:
    """Whether ``days`` can be a recency half-life: finite and above 0 (0, a negative or NaN
    would make older evidence count as much or more)."""
    return math.isfinite(days) and days > 0


def default_home() -> Path:
    """``~/.mimir``."""
    return Path.home() / ".mimir"


class MimirSettings(BaseSettings):
    """Settings with the ``MIMIR_`` prefix (e.g. ``MIMIR_HOME``, ``MIMIR_STORE_URI``).

    Each field's docstring is its description (``use_attribute_docstrings``): it is what
    ``docs/configuration.md`` shows (``python -m mimir_core.settings_doc --write``), so say
    there what the setting is for and why one would change it.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="ignore", use_attribute_docstrings=True
    )

    home: Path = Field(default_factory=default_home)
    """Mimir's home: the store (unless ``MIMIR_STORE_URI`` moves it), locks, logs, the hooks'
    spool, the model cache and the signing key. One home is one memory; point several hosts at
    the same home to share it."""
    store_uri: str | None = None
    """Where the LanceDB store lives when not in ``<home>/store``: any LanceDB URI, e.g.
    ``s3://bucket/mimir`` to share one memory between machines (see Object storage below)."""
    storage_options: dict[str, str] = Field(default_factory=dict)
    """Object-store options as a JSON object (endpoint, keys, region...), passed to LanceDB as
    they are; only needed with an object-store ``MIMIR_STORE_URI``."""
    embedder: Literal["fastembed", "hash"] = "fastembed"
    """``fastembed``: the real sentence model (all-MiniLM-L6-v2, int8), shipped in the package
    and run offline. ``hash``: keyword hashing with no model, for tests and tiny installs (it
    does not understand paraphrases). A store remembers its embedder; ``mimir reindex`` after a
    change."""
    scope: str | None = None
    """The project key written with each record; recall and recommend prefer it, ``*`` looks
    across projects. Unset, hooks, the CLI, the MCP server and Hermes use the repo root of the
    working directory; ``Mimir()`` in your own code reads no working directory and uses ``""``
    (pass ``scope=``)."""
    auto_consolidate: bool = True
    """Consolidate lessons in the background when due (see the next two settings), so lessons
    stay current without anyone running ``mimir consolidate``; ``0`` turns it off."""
    auto_consolidate_failures: int = Field(default=5, ge=1)
    """New failures since the last consolidation that make an automatic one due (with
    ``MIMIR_AUTO_CONSOLIDATE_HOURS``): lessons come from failures, so fewer is wasted work."""
    auto_consolidate_hours: float = Field(default=4.0, ge=0.0)
    """Hours since the last consolidation (or the store's creation) before an automatic one is
    due, so a burst of failures does not start a run every few minutes."""
    signing_key: SecretStr | None = None
    """HMAC key (at least 16 bytes) that signs lessons, so a tampered lesson is never served.
    Unset: a random per-install key in ``<home>/keys/signing.key``. Machines sharing a store
    must share the key, unless the store has a team trust list ([team memory](team.md))."""
    llm_model: str = "claude-haiku-4-5"
    """Model of the LLM judge that words the rules in ``mimir consolidate --llm`` (the key is
    ``ANTHROPIC_API_KEY``)."""
    llm_max_calls: int = Field(default=20, ge=1)
    """At most this many LLM calls per consolidation run: a cost cap that stops a run early."""
    llm_max_tokens: int = Field(default=60_000, ge=1)
    """At most this many LLM tokens (input + output) per consolidation run: a cost cap."""
    half_life_days: float | None = None
    """Optional recency decay (days, > 0): evidence this old counts half in recall and
    recommend, for projects where what worked a year ago may no longer work. Unset: no
    decay."""
    redact_patterns: list[str] = Field(default_factory=list)
    """Your own secret patterns (regexes, as a JSON list), redacted like the built-in kinds
    before anything is stored or embedded; the hooks apply them too."""
    guard_ask_after: int = Field(default=0, ge=0)
    """Claude Code's repeat guard asks the user before a command that failed this many times
    in this project and never worked there (``0``: never ask, only tell the agent). Hook
    processes read ``MIMIR_GUARD_ASK_AFTER`` themselves (they stay stdlib-only)."""
    log_level: str = "WARNING"
    """Level of the MCP server's log (stderr and ``<home>/logs/mcp.log``), e.g. ``INFO`` or
    ``DEBUG`` to see what it does; an unknown name means ``WARNING``."""

    @field_validator("home", mode="before")
    @classmethod
    def _check_home(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():  # Path("") would be the cwd
            raise ValueError("must not be empty (unset it for ~/.mimir)")
        return value

    @field_validator("half_life_days")
    @classmethod
    def _check_half_life(cls, value: float | None) -> float | None:
        if value is not None and not valid_half_life(value):
            raise ValueError(f"must be a finite number of days > 0; got {value!r}")
        return value

    @field_validator("redact_patterns")
    @classmethod
    def _compile_patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"redact_patterns: {pattern!r} is not a valid regex: {exc}"
                ) from exc
        return value


def load_settings(**values: Any) -> MimirSettings:
    """:class:`MimirSettings` from the environment (and ``values``); an invalid ``MIMIR_*``
    variable raises :class:`~mimir_core.errors.ConfigError` (see :func:`settings_error`)."""
    try:
        return MimirSettings(**values)
    except (ValidationError, SettingsError) as exc:
        raise settings_error(exc) from None


def settings_error(exc: ValidationError | SettingsError) -> ConfigError:
    """The :class:`~mimir_core.errors.ConfigError` for an error building :class:`MimirSettings`.

    Its message is one line naming the environment variable and the rejected value, e.g.
    ``MIMIR_EMBEDDER: Input should be 'fastembed' or 'hash'; got 'bogus'`` or
    ``MIMIR_REDACT_PATTERNS: is not valid JSON; got 'not json'``. Adapters use it to report
    bad settings without pydantic's multi-line dump.
    """
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False)
        first = errors[0] if errors else {"loc": (), "msg": str(exc)}
        field = str(first["loc"][0]) if first.get("loc") else ""
        msg = str(first["msg"]).removeprefix("Value error, ")
        if "input" in first and "; got " not in msg:
            msg += f"; got {short(first['input'])}"
        if len(errors) > 1:
            msg += f" (and {len(errors) - 1} more invalid setting(s))"
    else:  # 'error parsing value for field "x" from source "..."': the value is not JSON
        found = re.search(r'field "([^"]+)"', str(exc))
        field = found.group(1) if found else ""
        raw = os.environ.get(f"{ENV_PREFIX}{field.upper()}") if field else None
        msg = "is not valid JSON" + (f"; got {short(raw)}" if raw is not None else "")
    name = f"{ENV_PREFIX}{field.upper()}" if field else "settings"
    return ConfigError(f"{name}: {' '.join(msg.split())}")
