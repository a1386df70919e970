"""What only the pgvector index does, on a real PostgreSQL: which index answers a search
(EXPLAIN), the iterative HNSW scan that keeps an owner's far rows inside the index scan, the
search settings ending with their transaction, the foreign key that deletes a vector with
its memory, and several memsvc processes (each with its own pool) sharing the tables.
The behaviour both stores share is in test_vector_index_contract.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest

from contract.test_vector_index_contract import (
    DIM,
    SIGNATURE,
    Draft,
    Harness,
    _cosine_order,
    _drafts,
    _flag,
    _indexed,
    _postgres,
    _rows,
    _scope,
    _vectors,
)
from memsvc.kernel.models import Memory
from memsvc.kernel.vector_index import DimensionMismatch, VectorError
from memsvc.storage.postgres.database import PgDatabase
from memsvc.storage.vector_index import LocalVectorIndex


@pytest.fixture
def h(request: pytest.FixtureRequest) -> Harness:
    return _postgres(request)


@pytest.fixture
def replica(postgres_db_url: str, pg_database: PgDatabase) -> Iterator[LocalVectorIndex]:
    """A second memsvc process's index: its own pool on the same database."""
    database = PgDatabase(postgres_db_url)
    yield LocalVectorIndex(database)
    database.close()


def _crowd_and_far(h: Harness, n: int = 1500) -> tuple[list, np.ndarray, np.ndarray]:
    """`n` vectors of "crowd" around the query and `n` of "far" spread everywhere: the
    index's first candidates for the query all belong to "crowd"."""
    rng = np.random.default_rng(40)
    query = np.ones(DIM, dtype=np.float32)
    vectors = np.vstack([query + 0.1 * rng.normal(size=(n, DIM)), rng.normal(size=(n, DIM))]).astype(np.float32)
    memories = _indexed(h, _drafts(n, "crowd") + _drafts(n, "far"), vectors)
    h.sql("ANALYZE memory_vectors", ())
    return memories, vectors, query


def test_a_large_owners_search_is_an_hnsw_index_scan_with_the_scope_as_its_filter(h: Harness) -> None:
    _crowd_and_far(h)
    plan = h.index.explain_search(_scope("crowd", session_only=True, session_id=None), np.ones(DIM), 20)
    assert "Index Scan using memory_vectors_embedding" in plan
    hnsw = plan[plan.index("Index Scan using memory_vectors_embedding") :].splitlines()
    assert "Order By: (embedding <=>" in hnsw[1]
    assert "api_key_id = 'crowd'" in hnsw[2] and "session_id = ''" in hnsw[2] and "expires_at" in hnsw[2]


def test_an_owner_whose_rows_are_far_gets_its_k_nearest_from_the_iterative_index_scan(h: Harness) -> None:
    """Without hnsw.iterative_scan the index's candidate list holds only "crowd" rows, the
    filter leaves none of them, and the search would need its exact rescan."""
    memories, vectors, query = _crowd_and_far(h)
    assert "Index Scan using memory_vectors_embedding" in h.index.explain_search(_scope("far"), query, 20)
    hits = h.index.search(_scope("far"), query, 20)
    assert [hit.memory_id for hit in hits] == _cosine_order(memories[1500:], vectors[1500:], query, 20)
    assert h.index.exact_fallbacks == 0


def test_fewer_in_scope_than_k_is_answered_exactly(h: Harness) -> None:
    memories, vectors, query = _crowd_and_far(h, 300)
    few = _indexed(h, _drafts(3, "few"), _vectors(3, 41))
    hits = h.index.search(_scope("few"), query, 20)
    assert [hit.memory_id for hit in hits] == _cosine_order(few, _vectors(3, 41), query, 20)
    assert h.index.exact_fallbacks == 1


def test_the_search_settings_hold_for_the_search_transaction_only(h: Harness) -> None:
    _indexed(h, _drafts(5), _vectors(5, 42))
    with h.database.read() as conn:
        h.index.search(_scope(), np.ones(DIM), 20)
        inside = [conn.execute(f"SHOW hnsw.{name}").fetchone()[0] for name in ("iterative_scan", "ef_search")]
        h.index.search(_scope(), np.ones(DIM), 300)
        wider = conn.execute("SHOW hnsw.ef_search").fetchone()[0]
    assert inside == ["strict_order", "40"] and wider == "600"
    for _ in range(3):  # every pooled connection: none kept the search's settings
        with h.database.read() as conn:
            assert conn.execute("SHOW hnsw.iterative_scan").fetchone()[0] == "off"


def test_deleting_a_memory_deletes_its_vector_through_the_foreign_key(h: Harness) -> None:
    memories = _indexed(h, _drafts(2), _vectors(2, 43))
    h.sql("DELETE FROM memories WHERE memory_id = ?", (memories[0].memory_id,))
    assert h.index.count() == 1 and h.index.stored_vector(memories[0].memory_id) is None
    assert h.index.prune_orphans() == 0


def test_an_int8_signature_is_refused(h: Harness) -> None:
    with pytest.raises(VectorError, match="int8"):
        h.index.ensure(SIGNATURE + ":int8", DIM)
    assert h.index.state().table_exists is False


def test_a_dimension_above_what_hnsw_indexes_is_refused(h: Harness) -> None:
    with pytest.raises(VectorError, match="2000"):
        h.index.ensure("test:big:2001", 2001)


def test_replicas_ensuring_at_once_create_the_tables_once(h: Harness, replica: LocalVectorIndex) -> None:
    h.add_many(_drafts(3))
    barrier = threading.Barrier(2)
    results: list[bool] = []

    def ensure(index: LocalVectorIndex) -> None:
        barrier.wait()
        results.append(index.ensure(SIGNATURE, DIM))

    threads = [threading.Thread(target=ensure, args=(index,)) for index in (h.index, replica)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == [False, True]
    assert h.sql("SELECT generation FROM memory_vector_state", ()) == [(1,)]


def test_a_signature_change_by_another_replica_is_seen_at_once(h: Harness, replica: LocalVectorIndex) -> None:
    memories = _indexed(h, _drafts(2), _vectors(2, 44))
    assert replica.ensure("test:other:5", 5) is True
    assert h.index.state().signature == "test:other:5" and h.index.count() == 0
    with pytest.raises(DimensionMismatch):
        h.index.search(_scope(), np.ones(DIM), 5)
    assert h.index.upsert(_rows(memories, _vectors(2, 45, dim=5))) == 2  # the same pooled connections
    assert len(replica.search(_scope(), np.ones(5), 5)) == 2


def _wait_for_lock_wait(url: str, timeout_s: float = 30.0) -> None:
    """Poll until some session of this database waits for a row lock."""
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(url, autocommit=True) as watcher:
        while (
            watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()[0]
            == 0
        ):
            assert time.monotonic() < deadline, "no session waited for the edit's lock"
            time.sleep(0.01)


def test_an_upsert_racing_an_edit_in_another_process_never_keeps_the_old_vector(
    h: Harness, postgres_db_url: str
) -> None:
    """The edit is uncommitted when the upsert of the old text starts: the upsert waits for
    it, sees the new text and skips the row, which stays pending."""
    (memory,) = h.add_many([Draft("old words")])
    h.index.ensure(SIGNATURE, DIM)
    edit = psycopg.connect(postgres_db_url)
    try:
        edit.execute(
            "UPDATE memories SET content = 'new words', needs_reindex = true WHERE memory_id = %s", (memory.memory_id,)
        )
        written: list[int] = []
        upsert = threading.Thread(target=lambda: written.append(h.index.upsert(_rows([memory], _vectors(1, 46)))))
        upsert.start()
        _wait_for_lock_wait(postgres_db_url)
        edit.commit()
        upsert.join(60)
    finally:
        edit.close()
    assert written == [0]
    assert h.index.count() == 0 and _flag(h, memory)


def test_an_ensure_that_did_not_commit_leaves_no_table_behind_in_the_index(h: Harness) -> None:
    """ensure() inside a transaction that rolls back: its tables were seen and then undone,
    so the index must look again rather than query tables that do not exist."""
    with pytest.raises(RuntimeError, match="caller failed"):
        with h.database.write():
            h.index.ensure(SIGNATURE, DIM)
            raise RuntimeError("caller failed")
    assert h.index.state().table_exists is False and h.index.count() == 0
    assert h.index.search(_scope(), np.ones(DIM), 5) == []
    assert h.index.ensure(SIGNATURE, DIM) is True


def test_a_search_in_a_snapshot_older_than_another_replicas_reset_fails_as_a_vector_error(
    h: Harness, replica: LocalVectorIndex
) -> None:
    """The snapshot still records the old dimension while the table is already the new one:
    the search fails as a VectorError (the engine then falls back to keywords), never as a
    database error."""
    _indexed(h, _drafts(1000), _vectors(1000, 47))
    with h.database.read():
        assert h.index.state().active_dim == DIM  # the snapshot is taken here
        replica.ensure("test:other:5", 5)
        replica.upsert(_rows(replica.pending("alice", 1000), _vectors(1000, 48, dim=5)))
        h.sql("ANALYZE memory_vectors", ())  # so that the plan is the HNSW index scan
        with pytest.raises(VectorError, match="changed"):
            h.index.search(_scope(), np.ones(DIM), 5)
    assert len(h.index.search(_scope(), np.ones(5), 5)) == 5


def test_no_vector_missing_is_remembered_until_a_memory_is_written(h: Harness, replica: LocalVectorIndex) -> None:
    """The "nothing pending" answer of an owner is kept with the memories' change counter:
    asked again with no write in between it is not counted again, and once a memory is
    created (moving the counter) it is pending at once, for this replica and another one."""
    memories = _indexed(h, _drafts(5), np.eye(5, DIM, dtype=np.float32) + 0.1)
    assert h.index.pending_for_search(_scope(), 10) == []
    # Vectors removed behind the index's back (no write to memories): the kept answer holds,
    # which shows the count did not run again.
    h.sql("DELETE FROM memory_vectors WHERE memory_id = ?", (memories[0].memory_id,))
    assert h.index.pending_for_search(_scope(), 10) == []
    # A new memory moves the counter: counted again, pending.
    [new] = h.add_many([Draft("alice note new", "alice")])
    pending = {m.memory_id for m in h.index.pending_for_search(_scope(), 10)}
    assert pending == {memories[0].memory_id, new.memory_id}
    assert {m.memory_id for m in replica.pending_for_search(_scope(), 10)} == pending


# -- the owners' vectors in memory (PgVectorBlocks) ------------------------------------------


@pytest.fixture
def mem(request: pytest.FixtureRequest) -> Harness:
    """pgvector with the owners' vectors in memory, as the server runs it."""
    return _postgres(request, cache_bytes=10_000_000)


@pytest.fixture
def mem_replica(postgres_db_url: str, pg_database: PgDatabase) -> Iterator[LocalVectorIndex]:
    """Another replica with its own pool and its own blocks."""
    database = PgDatabase(postgres_db_url)
    yield LocalVectorIndex(database, cache_bytes=10_000_000)
    database.close()


def _ids_of(index: LocalVectorIndex, query: np.ndarray, k: int = 5, **scope: Any) -> list[int]:
    return [hit.memory_id for hit in index.search(_scope(**scope), query, k)]


def test_an_owner_is_searched_from_memory_after_one_build_with_the_exact_order(mem: Harness) -> None:
    vectors = _vectors(400, 60)
    memories = _indexed(mem, _drafts(200) + _drafts(200, "bob"), vectors)
    query = _vectors(1, 61)[0]
    for _ in range(3):
        assert _ids_of(mem.index, query, 20) == _cosine_order(memories[:200], vectors[:200], query, 20)
    stats = mem.index.cache.stats()
    assert (stats["builds"], stats["owners"], stats["hits"]) == (1, 1, 2)
    assert _ids_of(mem.index, query, 20, owner="bob") == _cosine_order(memories[200:], vectors[200:], query, 20)
    assert mem.index.cache.stats()["owners"] == 2


def test_every_write_through_another_replica_is_in_the_next_search_from_memory(
    mem: Harness, mem_replica: LocalVectorIndex
) -> None:
    """The replica's writes reach this process only through the database: each kind moves
    the owner's change number, and the next search applies the changed rows."""
    memories = _indexed(mem, _drafts(20), _vectors(20, 62))
    query = np.ones(DIM, dtype=np.float32)
    assert query.tolist() not in _vectors(20, 62).tolist()
    _ids_of(mem.index, query)  # the block is built
    # A vector stored later for a memory committed without one (nothing flagged it).
    [late] = mem.add_many([Draft("alice late")])
    assert not _flag(mem, late)
    assert late.memory_id not in _ids_of(mem.index, query)
    assert mem_replica.upsert(_rows([late], query[None, :])) == 1
    assert _ids_of(mem.index, query)[0] == late.memory_id
    # A new vector for a memory that had one: the block takes the replacement.
    near = query.copy()
    near[0] += 0.5
    assert mem_replica.upsert(_rows([memories[3]], near[None, :])) == 1
    assert _ids_of(mem.index, query)[:2] == [late.memory_id, memories[3].memory_id]
    # An embedding failure flags the memory and drops its vector: gone, and pending.
    assert mem_replica.mark_failed([late]) == 1
    assert _ids_of(mem.index, query)[0] == memories[3].memory_id
    assert late.memory_id in {m.memory_id for m in mem.index.pending_for_search(_scope(), 10)}
    # A deleted memory.
    mem.sql("DELETE FROM memories WHERE memory_id = ?", (memories[3].memory_id,))
    assert memories[3].memory_id not in _ids_of(mem.index, query, 25)
    stats = mem.index.cache.stats()
    assert stats["builds"] == 1 and stats["updates"] >= 4


def test_a_snapshot_older_than_the_block_is_answered_with_the_rows_it_sees(
    mem: Harness, mem_replica: LocalVectorIndex
) -> None:
    """A request that began before a write this process has applied already: the block and
    the owner's working set are newer than its snapshot, and answer it (as they answer its
    keyword search) with what they hold, never with less; without a working set to read the
    rows from, only the memories the snapshot holds."""
    _indexed(mem, _drafts(5), _vectors(5, 63))
    query = np.ones(DIM, dtype=np.float32)
    _ids_of(mem.index, query)
    with mem.database.read():
        before = _ids_of(mem.index, query, 10)  # the snapshot is taken here
        added: list[Memory] = []
        writer = threading.Thread(target=lambda: added.extend(mem.add_many([Draft("alice new")])))
        writer.start()
        writer.join(60)
        assert mem_replica.upsert(_rows(added, query[None, :])) == 1
        # Another request of this process sees the write: the block moves past this snapshot.
        newer: list[list[int]] = []
        search = threading.Thread(target=lambda: newer.append(_ids_of(mem.index, query, 10)))
        search.start()
        search.join(60)
        assert newer[0][0] == added[0].memory_id
        assert mem.index.cache.blocks.get("alice").version > 0
        assert _ids_of(mem.index, query, 10) == newer[0] != before
        rows_from_the_snapshot = mem.index.held_memories
        mem.index.held_memories = None
        try:
            assert _ids_of(mem.index, query, 10) == before
        finally:
            mem.index.held_memories = rows_from_the_snapshot
    assert _ids_of(mem.index, query, 10)[0] == added[0].memory_id


def test_an_owner_over_the_budget_is_searched_by_pgvector(request: pytest.FixtureRequest) -> None:
    small = _postgres(request, cache_bytes=500)  # smaller than any owner's block
    vectors = _vectors(50, 64)
    memories = _indexed(small, _drafts(50), vectors)
    query = _vectors(1, 65)[0]
    assert _ids_of(small.index, query, 5) == _cosine_order(memories, vectors, query, 5)
    assert small.index.cache.stats()["owners"] == 0 and small.index.cache.stats()["builds"] == 0


def test_a_new_signature_drops_every_block(mem: Harness, mem_replica: LocalVectorIndex) -> None:
    memories = _indexed(mem, _drafts(4), _vectors(4, 66))
    _ids_of(mem.index, np.ones(DIM, dtype=np.float32))
    assert mem_replica.ensure("test:other:5", 5) is True
    with pytest.raises(DimensionMismatch):
        mem.index.search(_scope(), np.ones(DIM), 5)
    assert mem_replica.upsert(_rows(memories, _vectors(4, 67, dim=5))) == 4
    assert len(mem.index.search(_scope(), np.ones(5), 5)) == 4
    assert mem.index.cache.stats()["resets"] >= 1


def test_the_hits_rows_come_from_the_owners_working_set(pg_database: PgDatabase) -> None:
    """With the backend's working sets as the row source a search from memory reads no row of
    its own: the first one builds the owner's set, and a delete is in the next one."""
    from memsvc.kernel.models import NewMemory
    from memsvc.storage.postgres.memory_backend import PgMemoryBackend

    backend = PgMemoryBackend(pg_database)
    index = LocalVectorIndex(pg_database, cache_bytes=10_000_000, held_memories=backend.working_sets.memories_in_scope)
    made = backend.create_many([NewMemory(api_key_id="alice", content=f"alice note {i}") for i in range(12)])
    memories = [backend.get(r.id) for r in made]
    vectors = _vectors(12, 68)
    index.ensure(SIGNATURE, DIM)
    assert index.upsert(_rows(memories, vectors)) == 12
    hits = index.search(_scope(), vectors[0], 5)
    assert [h.memory_id for h in hits] == _cosine_order(memories, vectors, vectors[0], 5)
    assert [h.memory for h in hits] == [backend.get(h.id) for h in hits]
    assert backend.working_sets.stats.builds == 1
    backend.delete(memories[0].id)
    assert memories[0].memory_id not in [h.memory_id for h in index.search(_scope(), vectors[0], 5)]
    assert backend.working_sets.stats.builds == 1 and backend.working_sets.stats.store_searches == 0
