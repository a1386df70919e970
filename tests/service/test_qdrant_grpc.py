"""The Qdrant tier (and the Qdrant settings routes) through the real gRPC
server, with qdrant-client's embedded local mode (`localPath`) — the same client calls a
server gets: the toggle drives `vectorStore`, dual-writes after enabling, filters by owner and
session, delete, cleanup with the real count, health with latency, the dimension-mismatch
fallback to sqlite-vec, the write-only API key, validation, the Reindex backfill, and an
unreachable server (unhealthy, retrieval still answers through sqlite-vec).

Dual-writes run in the background, so point counts are polled with a deadline.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import free_port
from google.protobuf import timestamp_pb2

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb
from tests.support.vectors import (
    STATIC_DIM,
    C,
    contents,
    create,
    error,
    error_info,
    error_text,
    models,  # noqa: F401 - fixture
    preview,
    qdrant_points,
    reindex,
    remote_settings,
    set_memory,
    set_qdrant,
    sql,
    static_model,  # noqa: F401 - fixture
    status,
    struct,
    violated_fields,
    wait_for,
    warm,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore:Local mode performs exact:UserWarning"),
    pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning"),
    pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection:UserWarning"),
]

EDITOR = "I prefer dark mode in my editor"
QDRANT_KEY = "qd-secret-api-key-5678"


@pytest.fixture
def remote(boot, models):
    """A server with the remote (loopback MiniLM) source on."""
    server, stubs = boot()
    set_memory(stubs, **remote_settings(models))
    return server, stubs


def qdrant_settings(stubs) -> spb.QdrantSettings:
    return stubs.settings.GetQdrantSettings(spb.GetQdrantSettingsRequest())


def memory_settings(stubs) -> spb.MemorySettings:
    return stubs.settings.GetMemorySettings(spb.GetMemorySettingsRequest())


def health(stubs) -> spb.QdrantHealth:
    return stubs.settings.CheckQdrantHealth(spb.CheckQdrantHealthRequest())


def search(stubs, query: str, **fields: Any) -> spb.SearchQdrantResponse:
    return stubs.settings.SearchQdrant(spb.SearchQdrantRequest(query=query, **fields))


def points_become(server, n: int) -> None:
    wait_for(lambda: qdrant_points(server) == n, 20, what=f"{n} Qdrant points (now {qdrant_points(server)})")


def timestamp(dt: datetime) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(dt)
    return ts


def iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ---- the toggle ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["qdrant", ":memory:"])
def test_enabling_selects_qdrant_and_disabling_resets_the_vector_store_to_auto(boot, path):
    server, stubs = boot()
    assert memory_settings(stubs).vector_store == "auto" and not status(stubs).qdrant.enabled
    enabled = set_qdrant(stubs, enabled=True, localPath=path)
    assert enabled.enabled and enabled.local_path == path
    assert memory_settings(stubs).vector_store == "qdrant"
    st = status(stubs)
    assert st.qdrant.enabled and st.qdrant.healthy and st.qdrant.error == ""
    assert st.vector_store.backend == "qdrant"
    probe = health(stubs)
    assert probe.ok and probe.mode == "local" and probe.latency_ms > 0 and probe.error == ""
    if path == "qdrant":
        assert (server.config.data_dir / "qdrant").is_dir()  # a relative folder lives in the data dir
    disabled = set_qdrant(stubs, enabled=False)
    assert not disabled.enabled
    assert memory_settings(stubs).vector_store == "auto"
    st = status(stubs)
    assert not st.qdrant.enabled and st.vector_store.backend == "sqlite-vec"


# ---- dual-write, filters, delete -------------------------------------------------------------


def test_writes_after_enabling_are_dual_written_and_search_filters_by_owner_and_session(remote):
    server, stubs = remote
    before = create(stubs, "key-q-a", "I wrote this before Qdrant was enabled", session_id="s1")
    set_qdrant(stubs, enabled=True, localPath="qdrant")
    a1 = create(stubs, "key-q-a", EDITOR, session_id="s1", key="pref:editor")
    a2 = create(stubs, "key-q-a", "I drink green tea every afternoon", session_id="s1")
    a3 = create(stubs, "key-q-a", "I keep my bike in the garage", session_id="s2")
    b1 = create(stubs, "key-q-b", "I prefer dark mode in my editor too", session_id="s1")
    points_become(server, 4)  # written after enabling only; the older row is not migrated
    info = health(stubs)
    assert info.ok and info.collection_exists and info.points_count == 4

    owner_a = search(stubs, "editor theme", api_key_id="key-q-a")
    assert {h.id for h in owner_a.results} == {a1, a2, a3}
    assert all(h.api_key_id == "key-q-a" for h in owner_a.results) and before not in {h.id for h in owner_a.results}
    hit = next(h for h in owner_a.results if h.id == a1)
    assert (hit.content, hit.key, hit.session_id) == (EDITOR, "pref:editor", "s1") and 0 < hit.score <= 1
    session = search(stubs, "editor theme", api_key_id="key-q-a", session_id="s1")
    assert {h.id for h in session.results} == {a1, a2}
    assert [h.id for h in search(stubs, "editor theme", api_key_id="key-q-b").results] == [b1]
    assert len(search(stubs, "editor theme", api_key_id="key-q-a", top_k=1).results) == 1

    resp = preview(stubs, "What editor theme do I like?", "key-q-a", strategy="semantic")
    assert resp.resolution.vector_store == "qdrant" and resp.resolution.fallback_reason == ""
    assert resp.resolution.strategy_used == "qdrant"
    assert {m.tier for m in resp.memories} == {"qdrant"}
    assert resp.memories[0].id == a1, contents(resp)
    assert resp.memories[0].HasField("vec_score")
    hybrid = preview(stubs, "editor theme", "key-q-a", strategy="hybrid")
    assert hybrid.resolution.vector_store == "qdrant" and hybrid.memories[0].tier == "hybrid-gated-convex"

    stubs.memory.DeleteMemory(mpb.DeleteMemoryRequest(id=a1))
    points_become(server, 3)
    assert a1 not in {h.id for h in search(stubs, "editor theme", api_key_id="key-q-a").results}


@pytest.mark.parametrize(
    "fields,field",
    [({"query": ""}, "query"), ({"query": "x", "top_k": 21}, "topK"), ({"query": "x", "top_k": 0}, "topK")],
)
def test_search_qdrant_validates_its_arguments(remote, fields, field):
    server, stubs = remote
    set_qdrant(stubs, enabled=True, localPath=":memory:")
    err = error(stubs.settings.SearchQdrant, spb.SearchQdrantRequest(**fields))
    assert err.code() == C.INVALID_ARGUMENT and field in violated_fields(err)


def test_a_query_with_no_word_the_model_knows_finds_nothing_rather_than_failing(boot, static_model):
    """The static model embeds a query of unknown tokens as all zeros, which has no cosine
    to anything: the test search answers no hits (it used to answer UNAVAILABLE, as if
    Qdrant were down), and Retrieve still answers by keywords."""
    server, stubs = boot(static_model=str(static_model))
    set_memory(stubs, enabled=True, embeddingSource="static", staticEnabled=True)
    warm(server)
    set_qdrant(stubs, enabled=True, localPath="qdrant")
    create(stubs, "key-q-zero", EDITOR)
    points_become(server, 1)
    assert list(search(stubs, "\u008c", api_key_id="key-q-zero").results) == []
    assert [h.content for h in search(stubs, "dark mode editor", api_key_id="key-q-zero").results] == [EDITOR]


def test_search_qdrant_while_disabled_is_failed_precondition(remote):
    server, stubs = remote
    err = error(stubs.settings.SearchQdrant, spb.SearchQdrantRequest(query="anything"))
    assert err.code() == C.FAILED_PRECONDITION and error_info(err).reason == "QDRANT_DISABLED"


# ---- cleanup -----------------------------------------------------------------------------------


def test_cleanup_deletes_expired_and_old_points_and_returns_the_count(remote):
    server, stubs = remote
    set_qdrant(stubs, enabled=True, localPath="qdrant")
    keep = create(stubs, "key-q-clean", "a memory that stays")
    expires = datetime.now(UTC) + timedelta(seconds=2)
    create(stubs, "key-q-clean", "a memory that expires at once", expires_at=timestamp(expires))
    old = create(stubs, "key-q-clean", "a memory from long ago")
    points_become(server, 3)
    sql(server, "UPDATE memories SET created_at = ? WHERE id = ?", (iso(datetime.now(UTC) - timedelta(days=40)), old))
    copied = reindex(stubs, target="qdrant")  # rewrites every point's payload from SQLite
    assert copied[0].pending == 3 and copied[-1].state == "done" and copied[-1].processed == 3
    # expiresAtUnix is rounded up to the second: wait until it is surely past.
    time.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 1.1)

    cleaned = stubs.settings.CleanupQdrant(spb.CleanupQdrantRequest())  # retentionDays from settings: 30
    assert cleaned.success and cleaned.deleted_count == 2
    assert qdrant_points(server) == 1
    assert [h.id for h in search(stubs, "memory", api_key_id="key-q-clean").results] == [keep]
    again = stubs.settings.CleanupQdrant(spb.CleanupQdrantRequest(retention_days=30))
    assert again.deleted_count == 0
    err = error(stubs.settings.CleanupQdrant, spb.CleanupQdrantRequest(retention_days=0))
    assert err.code() == C.INVALID_ARGUMENT and "retentionDays" in violated_fields(err)


# ---- dimension mismatch ------------------------------------------------------------------------


def test_a_dimension_mismatch_falls_back_to_sqlite_vec_and_says_why(boot, models, static_model):
    server, stubs = boot(static_model=str(static_model))
    set_memory(stubs, **remote_settings(models))
    set_qdrant(stubs, enabled=True, localPath="qdrant")
    create(stubs, "key-q-dim", "I usually run in the morning")
    points_become(server, 1)  # the collection now has 384 dimensions

    set_memory(stubs, embeddingSource="static", staticEnabled=True)  # 128 dimensions
    warm(server)
    editor = create(stubs, "key-q-dim", EDITOR)
    resp = preview(stubs, "dark mode editor", "key-q-dim", strategy="semantic")
    assert memory_settings(stubs).vector_store == "qdrant"
    assert resp.resolution.vector_store == "sqlite-vec" and resp.resolution.strategy_used == "vector"
    reason = resp.resolution.fallback_reason
    assert "qdrant" in reason.lower() and "dimension" in reason and "384" in reason and str(STATIC_DIM) in reason
    assert resp.memories and {m.tier for m in resp.memories} == {"vector"}
    assert editor in [m.id for m in resp.memories]
    assert qdrant_points(server) == 1  # the 128-d write was refused, never mixed in


# ---- settings: the key, validation --------------------------------------------------------------


def test_the_api_key_is_write_only_and_masked(boot):
    server, stubs = boot()
    saved = set_qdrant(stubs, apiKey=QDRANT_KEY, host="127.0.0.1", port=6334)
    assert saved.has_api_key and saved.api_key_masked == "***5678"
    assert QDRANT_KEY not in str(saved) and QDRANT_KEY not in str(qdrant_settings(stubs))
    assert qdrant_settings(stubs).api_key_masked == "***5678"
    kept = set_qdrant(stubs, collection="other_collection")  # a PUT without apiKey keeps it
    assert kept.has_api_key and kept.api_key_masked == "***5678"
    # Enabled against a server that is not there: the key goes nowhere visible either.
    set_qdrant(stubs, enabled=True)
    seen = [str(status(stubs)), str(health(stubs)), str(qdrant_settings(stubs))]
    seen.append(error_text(error(stubs.settings.CleanupQdrant, spb.CleanupQdrantRequest())))
    for text in seen:
        assert QDRANT_KEY not in text, text
    removed = set_qdrant(stubs, apiKey="", enabled=False)
    assert not removed.has_api_key and removed.api_key_masked == ""


@pytest.mark.parametrize(
    "patch,fields",
    [
        ({"port": 65536}, {"port"}),
        ({"port": 0}, {"port"}),
        ({"collection": ""}, {"collection"}),
        ({"enabled": True, "port": 65536, "collection": ""}, {"port", "collection"}),
    ],
)
def test_invalid_qdrant_settings_are_refused_and_nothing_is_saved(boot, patch, fields):
    server, stubs = boot()
    before_q, before_m = qdrant_settings(stubs), memory_settings(stubs)
    err = error(stubs.settings.UpdateQdrantSettings, spb.UpdateQdrantSettingsRequest(settings=struct(patch)))
    assert err.code() == C.INVALID_ARGUMENT
    assert violated_fields(err) == fields
    assert qdrant_settings(stubs) == before_q and memory_settings(stubs) == before_m


# ---- Reindex target qdrant ---------------------------------------------------------------------


def test_reindex_target_qdrant_backfills_memories_written_before_it_was_enabled(remote):
    server, stubs = remote
    made = [
        create(stubs, "key-q-backfill", text)
        for text in (
            EDITOR,
            "My cat is called Miso",
            "I will use PostgreSQL for this project",
            "I usually run in the morning",
        )
    ]
    set_qdrant(stubs, enabled=True, localPath="qdrant")
    assert qdrant_points(server) == 0
    messages = reindex(stubs, target="qdrant")
    assert messages[0].started and messages[0].pending == 4
    assert messages[-1].state == "done" and messages[-1].processed == 4 and messages[-1].errors == 0
    assert qdrant_points(server) == 4
    assert {h.id for h in search(stubs, "pets", api_key_id="key-q-backfill").results} == set(made)
    resp = preview(stubs, "What editor theme do I like?", "key-q-backfill", strategy="semantic")
    assert resp.resolution.vector_store == "qdrant" and resp.memories[0].id == made[0]


# ---- an unreachable server -----------------------------------------------------------------------


def test_an_unreachable_qdrant_is_unhealthy_and_retrieval_falls_back_to_sqlite_vec(remote):
    server, stubs = remote
    editor = create(stubs, "key-q-down", EDITOR)
    create(stubs, "key-q-down", "My cat is called Miso")
    set_qdrant(stubs, enabled=True, host="127.0.0.1", port=free_port())  # nothing listens there
    st = status(stubs)
    assert st.qdrant.enabled and not st.qdrant.healthy and st.qdrant.error
    probe = health(stubs)
    assert not probe.ok and probe.error and probe.mode == "server"
    create(stubs, "key-q-down", "I usually run in the morning")  # the write still succeeds
    resp = preview(stubs, "What editor theme do I like?", "key-q-down", strategy="semantic")
    assert resp.resolution.vector_store == "sqlite-vec" and resp.resolution.strategy_used == "vector"
    assert "qdrant failed" in resp.resolution.fallback_reason
    assert resp.memories[0].id == editor and len(resp.memories) == 3
    hot = stubs.engine.Retrieve(
        epb.RetrieveRequest(api_key_id="key-q-down", query="What editor theme do I like?", strategy="hybrid")
    )
    assert hot.memories[0].id == editor and hot.resolution.vector_store == "sqlite-vec"
    err = error(stubs.settings.SearchQdrant, spb.SearchQdrantRequest(query="editor"))
    assert err.code() == C.UNAVAILABLE


def test_list_qdrant_embedding_models(boot, models, static_model):
    server, stubs = boot(
        static_model=str(static_model),
        embedding_providers=(("local", models.base_url),),
        embedding_api_keys=(("openai", "sk-never-shown-qdrant-models"),),
    )
    resp = stubs.settings.ListQdrantEmbeddingModels(spb.ListQdrantEmbeddingModelsRequest())
    by_id = {m.id: m for m in resp.models}
    small = by_id["openai/text-embedding-3-small"]
    assert small.dimensions == 1536 and small.provider == "openai"
    assert by_id["transformers/all-MiniLM-L6-v2"].dimensions == 384
    assert any(m.provider == "static" and m.dimensions == STATIC_DIM for m in resp.models)
    assert "sk-never-shown" not in str(resp)
