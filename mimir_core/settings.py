"""All of Mimir's settings in one place, read from ``MIMIR_*`` environment variables.

Adapters build a :class:`MimirSettings` and hand its values to the core; core classes never read
the environment themselves (except :class:`~mimir_core.memory.Mimir` filling arguments left at
``None`` from these settings, which is documented there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
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
    signing_key: SecretStr | None = None
    half_life_days: float | None = None
    """Optional recency decay of recall and recommend evidence."""
    log_level: str = "WARNING"
