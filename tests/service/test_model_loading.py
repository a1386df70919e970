"""GetEngineStatus while a local model loads, through the real gRPC server: the status says
`loading` (not `available`) until the model can answer, then `ready`.

The default static model is built once per install under a lock file, by whichever process
gets there first. The test plays that other process: it holds the lock, so the server's load
waits for it (a real wait in memsvc's own build protocol), then puts a finished model in
place, releases the lock, and the server loads that real model2vec folder.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import time

import pytest
from conftest import make_config, start_server

from memsvc.embedding.sources import BUILD_MARKER, STATIC_DEFAULT_MODEL
from tests.support.vectors import STATIC_DIM, create, preview, set_memory, static_model, status  # noqa: F401

EDITOR = "I prefer dark mode in my editor"


def wait_for(stubs, predicate, what: str, timeout_s: float = 60.0):
    """Poll GetEngineStatus until predicate(embedding status) holds; returns that status."""
    deadline = time.monotonic() + timeout_s
    current = None
    while time.monotonic() < deadline:
        current = status(stubs).embedding
        if predicate(current):
            return current
        time.sleep(0.02)
    pytest.fail(f"engine status never showed {what}; last: {current}")


def test_status_says_loading_until_the_model_can_answer(tmp_path, static_model):
    cache = tmp_path / "models"
    cache.mkdir()
    handle = start_server(make_config(tmp_path / "server", static_cache_dir=cache))
    lock = open(cache / f"{STATIC_DEFAULT_MODEL}.lock", "a+")
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # "another process is building the model"
        stubs = handle.stubs()
        set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True)
        before = status(stubs).embedding
        assert (before.state, before.available, before.loaded) == ("not_loaded", False, False)
        memory_id = create(stubs, "key-loading", EDITOR)  # a write starts the load, and does not wait

        first = preview(stubs, "dark mode editor", "key-loading", strategy="semantic")
        assert first.resolution.strategy_used == "keyword" and "still loading" in first.resolution.fallback_reason
        loading = wait_for(stubs, lambda e: e.state == "loading", "loading")
        assert not loading.available and not loading.loaded and loading.dimensions == 0
        assert "building the static model" in loading.phase
        assert status(stubs).embedding.state == "loading"  # it waits for the lock we hold
        meanwhile = preview(stubs, "dark mode editor", "key-loading", strategy="semantic")
        assert meanwhile.resolution.strategy_used == "keyword" and meanwhile.memories[0].id == memory_id
        assert (
            "still loading (waiting for another process that is building the static model"
            in meanwhile.resolution.fallback_reason
        )  # every fallback says what the model is doing

        finished = cache / STATIC_DEFAULT_MODEL
        shutil.copytree(static_model, cache / ".finished")
        (cache / ".finished" / BUILD_MARKER).write_text(json.dumps({"by": "the test"}), encoding="utf-8")
        (cache / ".finished").rename(finished)
        fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

        ready = wait_for(stubs, lambda e: e.state == "ready", "ready")
        assert ready.available and ready.loaded and ready.dimensions == STATIC_DIM
        assert ready.phase == "" and ready.progress == 0.0
        assert ready.signature == f"static:{STATIC_DEFAULT_MODEL}:{STATIC_DIM}"
        answered = preview(stubs, "dark mode editor", "key-loading", strategy="semantic")
        assert answered.resolution.embedding_source == "static" and answered.memories[0].id == memory_id
        assert not list(cache.glob(".*building-*"))
    finally:
        lock.close()
        handle.stop()
