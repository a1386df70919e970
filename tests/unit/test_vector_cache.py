"""The per-owner in-memory vector cache of the sqlite-vec tier (memsvc.storage.vector_cache):
it answers exactly what vec0 answers, and stays coherent with every kind of write — this
process's, another process's (another index on the same file) and a rolled-back one."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from memsvc.kernel.models import Memory, MemoryPatch, NewMemory, SearchScope, utcnow
from memsvc.kernel.vector_index import VectorRow
from memsvc.storage.database import Database, iso
from memsvc.storage.sqlite_backend import SqliteMemoryBackend
from memsvc.storage.vector_index import LocalVectorIndex

DIM = 16
SIG = "static:test-model:16"


@pytest.fixture
def db(tmp_path: Path):
    database = Database(tmp_path / "data" / "memsvc.db")
    SqliteMemoryBackend(database).initialize()
    yield database
    database.close()


@pytest.fixture
def backend(db: Database) -> SqliteMemoryBackend:
    return SqliteMemoryBackend(db)


def _create(backend: SqliteMemoryBackend, n: int, owner: str, **kw) -> list[Memory]:
    results = backend.create_many(
        [NewMemory(api_key_id=owner, content=f"{owner} memory {i} {kw}", **kw) for i in range(n)]
    )
    return [backend.get(r.id) for r in results]


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _rows(memories: list[Memory], vectors: np.ndarray) -> list[VectorRow]:
    return [VectorRow.from_memory(m, v) for m, v in zip(memories, vectors)]


def _same(
    cached: LocalVectorIndex, plain: LocalVectorIndex, scope: SearchScope, query: np.ndarray, k: int = 10
) -> list:
    got = cached.search(scope, query, k)
    want = plain.search(scope, query, k)
    assert [h.id for h in got] == [h.id for h in want]
    assert np.allclose([h.distance for h in got], [h.distance for h in want], atol=1e-5)
    return got


def test_several_queries_in_one_search_answer_as_each_alone(db, backend):
    """search_many (the duplicate check's one search for a batch) returns, per query, what
    vec0 returns for it alone: from the owner's block in one matrix product, and from the
    store's statement when the block cannot serve."""
    rng = np.random.default_rng(5)
    cached = LocalVectorIndex(db, cache_bytes=10_000_000)
    plain = LocalVectorIndex(db)
    cached.ensure(SIG, DIM)
    a = _create(backend, 30, "a") + _create(backend, 10, "a", session_id="s1")
    b = _create(backend, 20, "b")
    cached.upsert(_rows(a + b, _unit(rng, len(a) + len(b))))
    now = utcnow()
    queries = _unit(rng, 6)
    for scope in (SearchScope("a", now), SearchScope("a", now, session_only=True, session_id="s1")):
        for index in (cached, plain):
            together = index.search_many(scope, list(queries), 7)
            alone = [plain.search(scope, q, 7) for q in queries]
            assert [[h.id for h in hits] for hits in together] == [[h.id for h in hits] for hits in alone]
            assert all(len(hits) == 7 for hits in together)
    assert cached.search_many(SearchScope("nobody", now), list(queries), 3) == [[]] * 6
    assert cached.search_many(SearchScope("a", now), [], 3) == []


@pytest.mark.parametrize("quantization", ["none", "int8"])
def test_cached_search_equals_vec0_and_follows_every_write(db, backend, quantization):
    rng = np.random.default_rng(3)
    cached = LocalVectorIndex(db, cache_bytes=10_000_000, quantization=quantization)
    plain = LocalVectorIndex(db, quantization=quantization)
    cached.ensure(SIG, DIM)
    a = _create(backend, 40, "a") + _create(backend, 10, "a", session_id="s1")
    b = _create(backend, 30, "b")
    cached.upsert(_rows(a + b, _unit(rng, len(a) + len(b))))
    now = utcnow()
    scopes = [
        SearchScope("a", now),
        SearchScope("b", now),
        SearchScope("a", now, session_only=True, session_id="s1"),
        SearchScope("a", now, created_after=now - timedelta(days=1)),
    ]
    queries = _unit(rng, 5)
    for scope in scopes:
        for q in queries:
            tol = 1e-5 if quantization == "none" else None
            if tol is None:  # int8: vec0 quantizes the query too; the cache keeps it exact
                got = {h.id for h in cached.search(scope, q, 10)}
                want = {h.id for h in plain.search(scope, q, 10)}
                assert len(got & want) >= 8
            else:
                _same(cached, plain, scope, q)
    assert cached.cache is not None and cached.cache.stats()["owners"] >= 2

    if quantization != "none":
        return
    # this process's writes: new vectors, replaced vectors, deleted memories, rescoped rows
    fresh = _create(backend, 5, "a")
    cached.upsert(_rows(fresh, np.repeat(queries[:1], 5, axis=0)))
    top = _same(cached, plain, scopes[0], queries[0], 5)
    assert {h.id for h in top} == {m.id for m in fresh}
    backend.delete(fresh[0].id)  # memory gone, vector left behind: both paths drop it on the join
    cached.delete([fresh[1].memory_id])
    _same(cached, plain, scopes[0], queries[0])
    cached.update_scope([m.__class__(**{**m.__dict__, "session_id": "s1"}) for m in fresh[2:]])
    _same(cached, plain, scopes[2], queries[0])
    cached.mark_failed([fresh[2].memory_id])
    _same(cached, plain, scopes[0], queries[0])


def test_another_writer_is_seen_and_a_rollback_drops_the_cache(db, backend):
    rng = np.random.default_rng(5)
    cached = LocalVectorIndex(db, cache_bytes=10_000_000)
    other = LocalVectorIndex(db)  # stands for another process writing the same file
    cached.ensure(SIG, DIM)
    mems = _create(backend, 20, "a")
    cached.upsert(_rows(mems, _unit(rng, 20)))
    scope = SearchScope("a", utcnow())
    q = _unit(rng, 1)[0]
    cached.search(scope, q, 5)
    extra = _create(backend, 3, "a")
    other.upsert(_rows(extra, np.repeat(q[None, :], 3, axis=0)))
    assert {h.id for h in cached.search(scope, q, 3)} == {m.id for m in extra}
    other.delete([m.memory_id for m in extra])
    assert not {h.id for h in cached.search(scope, q, 5)} & {m.id for m in extra}

    # A write transaction that fails after the cache learned its change: the cache is dropped.
    more = _create(backend, 1, "a")
    with pytest.raises(RuntimeError):
        with db.write() as conn:
            cached.delete_in_transaction(conn, [mems[0].memory_id])
            raise RuntimeError("boom")
    assert cached.cache.known_gen is None  # dropped, rebuilt from the file on the next search
    assert mems[0].id in {h.id for h in cached.search(scope, _vec(cached, mems[0]), 1)}
    assert more


def _vec(index: LocalVectorIndex, memory: Memory) -> np.ndarray:
    return np.frombuffer(index.stored_vector(memory.memory_id), dtype=np.float32)


def test_backfill_memo_sees_new_rows_and_reindex_marks(db, backend):
    rng = np.random.default_rng(9)
    cached = LocalVectorIndex(db, cache_bytes=10_000_000)
    cached.ensure(SIG, DIM)
    mems = _create(backend, 10, "a")
    scope = SearchScope("a", utcnow())
    assert {m.id for m in cached.pending_for_search(scope, 64)} == {m.id for m in mems}
    cached.upsert(_rows(mems, _unit(rng, 10)))
    cached.search(scope, _unit(rng, 1)[0], 3)
    assert cached.pending_for_search(scope, 64) == []  # remembered
    assert cached.pending_for_search(scope, 64) == []
    new = _create(backend, 2, "a")  # no vector yet: seen although the memo said clean
    assert {m.id for m in cached.pending_for_search(scope, 64)} == {m.id for m in new}
    cached.upsert(_rows(new, _unit(rng, 2)))
    assert cached.pending_for_search(scope, 64) == []
    assert backend.mark_all_for_reindex() == 12  # Reindex force
    assert len(cached.pending_for_search(scope, 64)) == 12
    cached.mark_failed([mems[0].memory_id])
    assert mems[0].id in {m.id for m in cached.pending_for_search(scope, 64)}


def test_an_owner_larger_than_the_budget_is_searched_in_sqlite(db, backend):
    rng = np.random.default_rng(2)
    cached = LocalVectorIndex(db, cache_bytes=500)  # smaller than any block
    plain = LocalVectorIndex(db)
    cached.ensure(SIG, DIM)
    mems = _create(backend, 30, "a")
    cached.upsert(_rows(mems, _unit(rng, 30)))
    _same(cached, plain, SearchScope("a", utcnow()), _unit(rng, 1)[0])
    assert cached.cache.stats()["owners"] == 0


def test_cached_hits_carry_their_memory_as_stored(db, backend):
    """The cached search reads each hit's row to re-check the scope; it hands that row on
    (VectorTier then loads nothing), and the row is the current one after an update."""
    from memsvc.kernel.models import MemoryPatch

    rng = np.random.default_rng(7)
    cached = LocalVectorIndex(db, cache_bytes=10_000_000)
    cached.ensure(SIG, DIM)
    mems = _create(backend, 12, "owner-m")
    vectors = _unit(rng, 12)
    cached.upsert(_rows(mems, vectors))
    scope = SearchScope("owner-m", utcnow())
    hits = cached.search(scope, vectors[3], 5)
    assert hits[0].id == mems[3].id
    assert all(h.memory == backend.get(h.id) for h in hits)
    backend.update(mems[3].id, MemoryPatch(metadata={"note": "changed"}))
    hit = cached.search(scope, vectors[3], 1)[0]
    assert hit.memory is not None and hit.memory.metadata == {"note": "changed"}


def test_the_hits_rows_come_from_the_owners_working_set_and_follow_its_writes(db, backend):
    """With the backend's working sets as the row source, a search from the matrix reads no
    row of its own: the first one builds the owner's set (a plain search never does), and
    an edit, an expiry and a delete through the store are in the next search's hits."""
    rng = np.random.default_rng(9)
    held = LocalVectorIndex(db, cache_bytes=10_000_000, held_memories=backend.working_sets.memories_in_scope)
    plain = LocalVectorIndex(db)
    held.ensure(SIG, DIM)
    mems = _create(backend, 30, "a")
    vectors = _unit(rng, 30)
    held.upsert(_rows(mems, vectors))
    scope = SearchScope("a", utcnow())
    got = _same(held, plain, scope, vectors[0])
    assert backend.working_sets.stats.builds == 1
    assert [h.memory for h in got] == [backend.get(h.id) for h in got]
    backend.update(mems[0].id, MemoryPatch(key="renamed"))
    with db.write() as conn:
        conn.execute(
            "UPDATE memories SET expires_at = ? WHERE id = ?", (iso(utcnow() - timedelta(seconds=1)), mems[1].id)
        )
    backend.delete(mems[2].id)
    got = _same(held, plain, scope, vectors[0])
    assert got[0].memory.key == "renamed"
    assert not {h.id for h in got} & {mems[1].id, mems[2].id}
    assert backend.working_sets.stats.builds == 1 and backend.working_sets.stats.store_searches == 0
