"""What a user gets once memory is enabled with nothing else configured, through the real
gRPC server: embeddingSource auto takes the static model when it is already built (here a
local static model folder, MEMORY_STATIC_MODEL), so Retrieve runs hybrid; with
MEMORY_AUTO_STATIC off, auto stays keyword-only until a source is enabled.
"""

from __future__ import annotations

from memsvc.v1 import engine_pb2 as epb
from tests.support.vectors import STATIC_NAME, create, set_memory, static_model, warm  # noqa: F401 - fixture

EDITOR = "I prefer dark mode in my editor"


def retrieve(stubs, query: str) -> epb.RetrieveResponse:
    return stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id="key-box", query=query))


def test_enabled_memory_with_nothing_configured_runs_hybrid_on_the_built_static_model(boot, static_model):
    server, stubs = boot(auto_static=True, static_model=str(static_model))
    set_memory(stubs, enabled=True)  # embeddingSource auto, staticEnabled false: the defaults
    warm(server)
    memory_id = create(stubs, "key-box", EDITOR)
    resp = retrieve(stubs, "What editor theme do I like?")
    assert resp.resolution.strategy_used == "hybrid-gated-convex", resp.resolution.fallback_reason
    assert resp.resolution.embedding_source == "static" and resp.resolution.embedding_model == STATIC_NAME
    assert resp.memories[0].id == memory_id and resp.memories[0].HasField("vec_score")


def test_with_auto_static_off_auto_stays_keyword_only(boot, static_model):
    server, stubs = boot(auto_static=False, static_model=str(static_model))
    set_memory(stubs, enabled=True)
    create(stubs, "key-box", EDITOR)
    resp = retrieve(stubs, "dark mode editor")
    assert resp.resolution.strategy_used == "keyword+recent"
    assert "keyword search only" in resp.resolution.fallback_reason
