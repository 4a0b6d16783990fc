"""Shared fixtures. No test touches the network or the real home directory."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# Isolate every test (and every subprocess it starts) from the real home before anything runs.
_SANDBOX = Path(tempfile.mkdtemp(prefix="mimir-tests-home-"))
atexit.register(shutil.rmtree, _SANDBOX, ignore_errors=True)  # ~50 MB a run (models, stores)
os.environ["HOME"] = str(_SANDBOX)
os.environ["MIMIR_HOME"] = str(_SANDBOX / ".mimir")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.pop("MIMIR_STORE_URI", None)
os.environ.pop("MIMIR_EMBEDDER", None)
os.environ.pop("ANTHROPIC_API_KEY", None)

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def fast_embedder() -> object:
    """The real offline MiniLM embedder, loaded once per test session."""
    from mimir_core.embed.core import CachedEmbedder, FastEmbedder

    emb = FastEmbedder(_SANDBOX / "models")
    emb.embed(["warm up"])
    return CachedEmbedder(emb, size=4096).inner


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh Mimir home directory."""
    return tmp_path / "mimir-home"


@pytest.fixture
def mimir(home: Path, fast_embedder: object) -> Iterator[object]:
    """A Mimir on a fresh store with the real embedder."""
    from mimir_core import Mimir

    m = Mimir(home, embedder=fast_embedder)  # type: ignore[arg-type]
    yield m
    m.close()


@pytest.fixture
def hash_mimir(home: Path) -> Iterator[object]:
    """A Mimir on a fresh store with the hash embedder (fast, keyword-only)."""
    from mimir_core import Mimir

    m = Mimir(home, embedder="hash")
    yield m
    m.close()
