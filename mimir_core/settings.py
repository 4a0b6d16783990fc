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
    """Settings with the ``MIMIR_`` prefix (e.g. ``MIMIR_HOME``, ``MIMIR_STORE_URI``)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    home: Path = Field(default_factory=default_home)
    """Local directory for the store (by default), locks, logs, the spool and the signing key."""
    store_uri: str | None = None
    """Where the LanceDB store lives, if not ``<home>/store`` (e.g. ``s3://bucket/mimir``)."""
    storage_options: dict[str, str] = Field(default_factory=dict)
    """Object-store options as JSON (endpoint, keys, region...), passed to LanceDB."""
    embedder: Literal["fastembed", "hash"] = "fastembed"
    """``fastembed`` (the real offline MiniLM model) or ``hash`` (tests and tiny installs)."""
    scope: str | None = None
    """Default project scope; adapters derive it from the working directory when unset."""
    auto_consolidate: bool = True
    """Consolidate lessons in the background after enough new failures and time (``0``: off)."""
    auto_consolidate_failures: int = Field(default=5, ge=1)
    """New failures since the last consolidation that start an automatic one."""
    auto_consolidate_hours: float = Field(default=4.0, ge=0.0)
    """Hours since the last consolidation (or the store's creation) before an automatic one."""
    signing_key: SecretStr | None = None
    """HMAC key for lessons (default: a random per-install key in ``<home>/keys/signing.key``)."""
    llm_model: str = "claude-haiku-4-5"
    """Model of the LLM judge (``mimir consolidate --llm``)."""
    llm_max_calls: int = Field(default=20, ge=1)
    """At most this many LLM calls per consolidation run."""
    llm_max_tokens: int = Field(default=60_000, ge=1)
    """At most this many LLM tokens (input + output) per consolidation run."""
    half_life_days: float | None = None
    """Optional recency decay of recall and recommend evidence."""
    redact_patterns: list[str] = Field(default_factory=list)
    """Extra secret patterns (regexes, as a JSON list) redacted like the built-in ones."""
    guard_ask_after: int = Field(default=0, ge=0)
    """Claude Code's repeat guard asks the user before a command that failed this many times
    in this project and never worked there (``0``: never ask, only tell the agent). Hook
    processes read ``MIMIR_GUARD_ASK_AFTER`` themselves (they stay stdlib-only)."""

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

    log_level: str = "WARNING"


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
