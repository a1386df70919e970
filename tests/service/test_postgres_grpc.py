"""memsvc serving entirely from PostgreSQL (MEMSVC_DATABASE_URL), through the real gRPC
server: memories, hybrid retrieval with the static model over pgvector, Reindex, settings,
credentials with auth on, two replicas on one database seeing each other's writes at once,
character memory refused as per node, Qdrant's local mode refused, and the URL's password
never shown."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest
from conftest import ServerHandle, make_config, start_server
from support.rpc_errors import error_info
from support.vectors import create, reindex, set_memory, set_qdrant, static_model, status, warm  # noqa: F401

from memsvc.v1 import credentials_pb2, credentials_pb2_grpc
from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb

PASSWORD = "pw-Zq81-never-shown"
ADMIN = "pg-admin-token"


def with_password(url: str) -> str:
    """The test server trusts loopback, so a password in the URL is accepted and unused:
    it is there to be kept out of every answer and log."""
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{PASSWORD}@", 1)


@pytest.fixture
def replicas(tmp_path: Path, postgres_db_url: str) -> Iterator[Callable[..., ServerHandle]]:
    """In-process servers on the test's own PostgreSQL database, each with its own data dir
    (as replicas on other hosts have): `replica(**config overrides)`."""
    handles: list[ServerHandle] = []

    def start(**overrides: Any) -> ServerHandle:
        config = make_config(
            tmp_path / f"replica{len(handles)}",
            database_url=with_password(postgres_db_url),
            database_pool_size=4,
            **overrides,
        )
        handles.append(start_server(config))
        return handles[-1]

    yield start
    for handle in handles:
        handle.stop()


def rows(url: str, query: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query, params).fetchall()


def refused(call: Callable[[], Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def test_memories_are_created_read_listed_updated_and_deleted_in_postgres(replicas, postgres_db_url):
    server = replicas()
    stubs = server.stubs()
    made = stubs.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="pg-owner", content="I drink green tea", key="drink"), timeout=10
    )
    assert rows(postgres_db_url, "SELECT content, key FROM memories WHERE id = %s", (made.id,)) == [
        ("I drink green tea", "drink")
    ]
    assert not (server.config.data_dir / "memsvc.db").exists()  # nothing went to SQLite

    assert stubs.memory.GetMemory(mpb.GetMemoryRequest(id=made.id), timeout=10).content == "I drink green tea"
    stubs.memory.UpdateMemory(mpb.UpdateMemoryRequest(id=made.id, content="I drink oolong tea"), timeout=10)
    listing = stubs.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="pg-owner"), timeout=10)
    assert [(m.id, m.content) for m in listing.data] == [(made.id, "I drink oolong tea")]
    stubs.memory.DeleteMemory(mpb.DeleteMemoryRequest(id=made.id), timeout=10)
    assert rows(postgres_db_url, "SELECT count(*) FROM memories") == [(0,)]
    gone = refused(lambda: stubs.memory.GetMemory(mpb.GetMemoryRequest(id=made.id), timeout=10))
    assert gone.code() is grpc.StatusCode.NOT_FOUND


def test_keyword_retrieval_and_engine_status_name_postgresql(replicas):
    stubs = replicas().stubs()
    set_memory(stubs, enabled=True)
    wanted = create(stubs, "pg-kw", "My sister lives in Lisbon and teaches piano")
    create(stubs, "pg-kw", "The weather was cold on Monday")
    create(stubs, "pg-other", "My sister lives in Lisbon too")  # another owner: never returned
    # No embedding source: hybrid is answered by PostgreSQL's full-text search alone.
    found = stubs.engine.Retrieve(
        epb.RetrieveRequest(api_key_id="pg-kw", query="where does my sister live", strategy="hybrid"), timeout=10
    )
    assert [m.id for m in found.memories] == [wanted]
    assert found.resolution.strategy_used == "keyword+recent" and found.resolution.embedding_source == "none"
    st = status(stubs)
    assert st.keyword.available and st.keyword.backend == "PostgreSQL full-text search"
    assert st.vector_store.backend == "pgvector"


def test_hybrid_retrieval_with_the_static_model_and_reindex_on_pgvector(replicas, postgres_db_url, static_model):
    server = replicas(static_model=str(static_model))
    stubs = server.stubs()
    set_memory(stubs, enabled=True)  # no source yet: writes are not embedded
    facts = ["I prefer dark mode in my editor", "My cat is called Miso", "I usually run in the morning"]
    ids = [create(stubs, "pg-hybrid", text) for text in facts]
    set_memory(stubs, embeddingSource="static", staticEnabled=True)
    warm(server)
    assert status(stubs).vector_store.needs_reindex == 3

    messages = reindex(stubs)
    assert messages[0].started and messages[0].pending == 3
    assert messages[-1].state == "done" and messages[-1].processed == 3 and messages[-1].errors == 0
    st = status(stubs).vector_store
    assert (st.backend, st.row_count, st.needs_reindex) == ("pgvector", 3, 0)
    assert rows(postgres_db_url, "SELECT count(*) FROM memory_vectors") == [(3,)]

    found = stubs.engine.Retrieve(
        epb.RetrieveRequest(api_key_id="pg-hybrid", query="what is my cat's name", strategy="hybrid"), timeout=30
    )
    assert found.memories[0].id == ids[1]
    assert found.resolution.strategy_used == "hybrid-gated-convex" and not found.resolution.fallback_reason


def test_a_write_and_a_settings_change_through_one_replica_are_seen_through_the_other_at_once(replicas):
    a, b = replicas().stubs(), replicas().stubs()
    assert b.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="pg-shared"), timeout=10).data == []
    made = create(a, "pg-shared", "written through replica A")
    listing = b.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="pg-shared"), timeout=10)
    assert [m.id for m in listing.data] == [made]  # B's read cache followed the database's change counter
    b.memory.UpdateMemory(mpb.UpdateMemoryRequest(id=made, content="edited through replica B"), timeout=10)
    assert a.memory.GetMemory(mpb.GetMemoryRequest(id=made), timeout=10).content == "edited through replica B"

    before = b.settings.GetMemorySettings(spb.GetMemorySettingsRequest(), timeout=10)
    set_memory(a, maxTokens=before.max_tokens + 111)
    after = b.settings.GetMemorySettings(spb.GetMemorySettingsRequest(), timeout=10)
    assert after.max_tokens == before.max_tokens + 111


def test_credentials_with_auth_on_live_in_postgres_and_hold_on_every_replica(replicas, postgres_db_url):
    a, b = replicas(api_tokens=(ADMIN,)), replicas(api_tokens=(ADMIN,))
    admin = credentials_pb2_grpc.CredentialServiceStub(a.channel(ADMIN))
    issued = admin.CreateCredential(
        credentials_pb2.CreateCredentialRequest(
            id="pg-tenant", permissions=["read:memory", "write:memory"], tenants=["pg-t1"]
        ),
        timeout=10,
    )
    assert rows(postgres_db_url, "SELECT id FROM credentials") == [("pg-tenant",)]

    tenant = b.stubs(issued.token)  # the other replica knows the token from the shared database
    made = create(tenant, "pg-t1", "tenant note")
    assert tenant.memory.GetMemory(mpb.GetMemoryRequest(id=made), timeout=10).content == "tenant note"
    other = refused(lambda: create(tenant, "pg-t2", "not mine"))
    assert other.code() is grpc.StatusCode.PERMISSION_DENIED
    anonymous = refused(lambda: create(b.stubs(), "pg-t1", "no token"))
    assert anonymous.code() is grpc.StatusCode.UNAUTHENTICATED

    assert b.app.credentials.cached() == 1  # B answers the tenant from its cache of verified credentials

    admin.RevokeCredential(credentials_pb2.RevokeCredentialRequest(id="pg-tenant"), timeout=10)
    revoked = refused(lambda: create(tenant, "pg-t1", "after revocation"))
    assert revoked.code() is grpc.StatusCode.UNAUTHENTICATED
    again = admin.CreateCredential(
        credentials_pb2.CreateCredentialRequest(id="pg-tenant-2", permissions=["read:memory"], tenants=["pg-t1"]),
        timeout=10,
    )
    assert b.stubs(again.token).memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="pg-t1"), timeout=10).data


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.memory.ListRecentFiles(mpb.ListRecentFilesRequest(), timeout=10),
        lambda s: s.memory.GetRecentFile(mpb.GetRecentFileRequest(filename="Alice.json"), timeout=10),
        lambda s: s.memory.ScanLegacy(mpb.ScanLegacyRequest(), timeout=10),
        lambda s: s.settings.GetReviewConfig(spb.GetToggleRequest(), timeout=10),
    ],
    ids=["ListRecentFiles", "GetRecentFile", "ScanLegacy", "GetReviewConfig"],
)
def test_character_memory_is_refused_as_per_node_with_a_shared_store(replicas, call):
    server = replicas()
    err = refused(lambda: call(server.stubs()))
    assert err.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert error_info(err).reason == "CHARACTER_MEMORY_PER_NODE"
    assert "per node" in err.details() and "MEMSVC_DATABASE_URL" in err.details()
    assert not server.config.runtime_memory_dir.exists()  # no per-replica files were made


def test_qdrant_local_mode_is_refused_with_a_shared_store_and_nothing_is_saved(replicas):
    stubs = replicas().stubs()
    before = stubs.settings.GetQdrantSettings(spb.GetQdrantSettingsRequest(), timeout=10)
    err = refused(lambda: set_qdrant(stubs, enabled=True, localPath="qdrant"))
    assert err.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "server or cluster" in err.details() and "MEMSVC_DATABASE_URL" in err.details()
    assert stubs.settings.GetQdrantSettings(spb.GetQdrantSettingsRequest(), timeout=10) == before


def test_metrics_have_no_database_file_gauges_with_postgresql(replicas):
    server = replicas()
    names = {family.name for family in server.app.metrics.registry.collect()}
    assert "memsvc_rpc" in names and "memsvc_embedding_cache" in names
    assert "memsvc_db_size_bytes" not in names and "memsvc_data_free_bytes" not in names


def test_the_password_of_the_url_is_in_no_answer(replicas):
    server = replicas()
    stubs = server.stubs()
    create(stubs, "pg-pw", "a memory")
    answers = [
        status(stubs),
        stubs.settings.GetMemorySettings(spb.GetMemorySettingsRequest(), timeout=10),
        stubs.memory.CheckHealth(mpb.CheckHealthRequest(), timeout=10),
    ]
    assert all(PASSWORD not in str(answer) for answer in answers)
    assert PASSWORD not in repr(server.config) and PASSWORD not in server.app.stores.info.location
    assert server.app.stores.info.location.startswith("postgresql://postgres:***@127.0.0.1:")


def test_batches_summarize_candidates_and_clear_run_on_postgres(replicas, postgres_db_url):
    stubs = replicas().stubs()
    batch = stubs.memory.CreateMemories(
        mpb.CreateMemoriesRequest(
            memories=[
                mpb.CreateMemoryRequest(api_key_id="pg-batch", content=f"batch memory {i}", type="episodic")
                for i in range(3)
            ]
        ),
        timeout=10,
    )
    assert (batch.stored_count, batch.failed_count) == (3, 0)
    rows(
        postgres_db_url,
        "UPDATE memories SET created_at = now() - interval '30 days', "
        "updated_at = now() - interval '30 days' RETURNING id",
    )
    dry = stubs.engine.Summarize(
        epb.SummarizeRequest(api_key_id="pg-batch", older_than_days=7, dry_run=True), timeout=30
    )
    assert sorted(c.id for c in dry.candidates) == sorted(r.id for r in batch.results) and dry.deleted_count == 0
    assert rows(postgres_db_url, "SELECT count(*) FROM memories WHERE api_key_id = 'pg-batch'") == [(3,)]
    cleared = stubs.memory.ClearMemories(mpb.ClearMemoriesRequest(api_key_id="pg-batch"), timeout=10)
    assert cleared.deleted_count == 3
    assert rows(postgres_db_url, "SELECT count(*) FROM memories") == [(0,)]
