"""All of Mimir's settings in one place, read from ``MIMIR_*`` environment variables.

Adapters build a :class:`MimirSettings` and hand its values to the core; core classes never read
the environment themselves (except :class:`~mimir_core.memory.Mimir` filling arguments left at
``None`` from these settings, which is documented there).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_home() -> Path:
    """``~/.mimir``."""
    return Path.home() / ".mimir"


class MimirSettings(BaseSettings):
    """Settings with the ``MIMIR_`` prefix (e.g. ``MIMIR_HOME``, ``MIMIR_STORE_URI``)."""

    model_config = SettingsConfigDict(env_prefix="MIMIR_", extra="ignore")

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
