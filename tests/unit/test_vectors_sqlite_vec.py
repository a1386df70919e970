"""The sqlite-vec tier against a real database file with the real extension."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from memsvc.kernel.models import Memory, MemoryFilter, NewMemory, SearchScope, utcnow
from memsvc.kernel.vector_index import DimensionMismatch, VectorError, VectorIndex, VectorRow, VectorUnavailable
from memsvc.storage.database import Database, iso
from memsvc.storage.sqlite_backend import SqliteMemoryBackend
from memsvc.storage.sqlite_vec import NEVER_US, delete_in, unix_us
from memsvc.storage.vector_index import LocalVectorIndex
from memsvc.storage.vector_sql import make_signature, signature_dim

DIM = 8
SIG = "static:test-model:8"


@pytest.fixture
def db(tmp_path: Path):
    database = Database(tmp_path / "data" / "memsvc.db")
    SqliteMemoryBackend(database).initialize()
    yield database
    database.close()


@pytest.fixture
def backend(db: Database) -> SqliteMemoryBackend:
    return SqliteMemoryBackend(db)


@pytest.fixture
def index(db: Database) -> LocalVectorIndex:
    return LocalVectorIndex(db)


def _create(backend: SqliteMemoryBackend, n: int, owner: str = "a", **kw) -> list[Memory]:
    results = backend.create_many([NewMemory(api_key_id=owner, content=f"{owner} memory {i}", **kw) for i in range(n)])
    return [backend.get(r.id) for r in results]


def _unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _near(target: np.ndarray, rng: np.random.Generator, n: int, noise: float) -> np.ndarray:
    x = target[None, :] + noise * rng.standard_normal((n, target.shape[0])).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _rows(memories: list[Memory], vectors) -> list[VectorRow]:
    return [VectorRow.from_memory(m, v) for m, v in zip(memories, vectors)]


def _scope(owner: str | None = "a", **kw) -> SearchScope:
    return SearchScope(api_key_id=owner, now=kw.pop("now", utcnow()), **kw)


def _flags(db: Database) -> list[int]:
    with db.read() as conn:
        return [r[0] for r in conn.execute("SELECT needs_reindex FROM memories ORDER BY memory_id").fetchall()]


def _table_exists(db: Database) -> bool:
    with db.read() as conn:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'vec_memories'").fetchone() is not None


def _meta(db: Database) -> tuple:
    with db.read() as conn:
        return tuple(
            conn.execute(
                "SELECT active_dim, embedding_signature, last_reset_at, vec_loaded FROM memory_vec_meta"
            ).fetchone()
        )


# -- no table yet ------------------------------------------------------------------------------


def test_every_call_before_the_table_exists_is_safe(db, backend, index):
    mems = _create(backend, 3)
    assert isinstance(index, VectorIndex)
    assert not _table_exists(db)
    assert index.count() == 0
    assert index.search(_scope(), np.ones(DIM), 5) == []
    assert index.delete([m.memory_id for m in mems]).deleted == 0
    assert index.update_scope(mems) == 0
    assert index.prune_orphans() == 0
    assert index.stored_vector(mems[0].memory_id) is None
    assert index.pending_count() == 3 and {m.id for m in index.pending("a", 10)} == {m.id for m in mems}
    assert index.mark_failed([mems[0].memory_id]) == 1
    with db.write() as conn:
        assert delete_in(conn, [1, 2]) == 0
    health = index.health()
    assert health["table_exists"] is False and health["ok"] is False and "first embedding" in health["error"]
    # Writing before the dimension is known is a clear error, never "no such table".
    with pytest.raises(VectorError) as info:
        index.upsert(_rows(mems, np.ones((3, DIM))))
    assert "ensure" in str(info.value) and "no such table" not in str(info.value)
    # Once the dimension is known the table exists, and it comes back if it goes missing.
    assert index.ensure(SIG, DIM) is True
    assert _table_exists(db)
    with db.write() as conn:
        conn.execute("DROP TABLE vec_memories")
    assert index.count() == 0 and index.search(_scope(), np.ones(DIM), 5) == []
    assert index.upsert(_rows(mems, np.ones((3, DIM)))) == 3
    assert _table_exists(db) and index.count() == 3


# -- signature tracking ------------------------------------------------------------------------


def test_signature_change_resets_the_table_and_marks_every_row(db, backend, index):
    rng = np.random.default_rng(1)
    mems = _create(backend, 4) + _create(backend, 2, owner="b")
    assert index.ensure(SIG, DIM) is True
    active_dim, signature, reset_at, loaded = _meta(db)
    assert (active_dim, signature, loaded) == (DIM, SIG, 1) and reset_at
    assert _flags(db) == [1] * 6  # rows that existed before the first signature need vectors too
    assert index.upsert(_rows(mems, _unit(rng, 6))) == 6
    assert _flags(db) == [0] * 6 and index.count() == 6 and index.pending_count() == 0

    # Same signature: nothing happens (no reset, vectors kept, last_reset_at unchanged).
    assert index.ensure(SIG, DIM) is False
    assert index.count() == 6 and _meta(db)[2] == reset_at

    # A new model (and dimension): table dropped and recreated with the new dimension, every
    # memory marked, the new signature recorded.
    new_sig = make_signature("remote", "openai/text-embedding-3-small", 12)
    assert index.ensure(new_sig, 12) is True
    assert _flags(db) == [1] * 6 and index.count() == 0 and index.pending_count() == 6
    active_dim, signature, reset_at2, loaded = _meta(db)
    assert (active_dim, signature, loaded) == (12, new_sig, 1) and reset_at2 >= reset_at
    with db.read() as conn:
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'vec_memories'").fetchone()[0]
    assert "float[12]" in sql and "partition key" in sql and "distance_metric=cosine" in sql
    with pytest.raises(DimensionMismatch):
        index.upsert(_rows(mems[:1], _unit(rng, 1)))  # an 8-d vector into the 12-d table
    assert signature_dim(new_sig) == 12 and signature_dim(new_sig + ":int8") == 12


def test_switching_to_int8_is_a_signature_change(db, backend):
    mems = _create(backend, 2)
    plain, quantized = LocalVectorIndex(db), LocalVectorIndex(db, quantization="int8")
    assert plain.ensure(SIG, DIM) is True
    plain.upsert(_rows(mems, np.ones((2, DIM))))
    assert quantized.ensure(SIG, DIM) is True
    assert _meta(db)[1] == SIG + ":int8" and _flags(db) == [1, 1] and quantized.count() == 0
    assert quantized.ensure(SIG + ":int8", DIM) is False  # the suffix may be passed explicitly
    with pytest.raises(VectorError):
        plain.effective_signature(SIG + ":int8")


# -- search ------------------------------------------------------------------------------------


def test_upsert_and_search_round_trip_in_order(db, backend, index):
    mems = _create(backend, 4)
    hand = np.array(
        [
            [1, 0, 0, 0, 0, 0, 0, 0],
            [0, 1, 0, 0, 0, 0, 0, 0],
            [0.9, 0.1, 0, 0, 0, 0, 0, 0],
            [0.6, 0.4, 0, 0, 0, 0, 0, 0],
        ],
        dtype=np.float32,
    )
    index.ensure(SIG, DIM)
    assert index.upsert(_rows(mems, hand)) == 4
    hits = index.search(_scope(), [1, 0, 0, 0, 0, 0, 0, 0], 10)
    assert [h.id for h in hits] == [mems[0].id, mems[2].id, mems[3].id, mems[1].id]
    assert [h.memory_id for h in hits] == [mems[i].memory_id for i in (0, 2, 3, 1)]
    q = np.array([1, 0, 0, 0, 0, 0, 0, 0], dtype=np.float32)
    for h, v in zip(hits, hand[[0, 2, 3, 1]]):
        expected = 1 - float(v @ q) / float(np.linalg.norm(v))
        assert h.distance == pytest.approx(expected, abs=1e-6)
        assert h.score == pytest.approx(1 / (1 + h.distance))
    assert len(index.search(_scope(), q, 2)) == 2

    # Replacing a vector moves the memory.
    index.upsert(_rows([mems[1]], [q]))
    assert index.search(_scope(), q, 1)[0].id in {mems[0].id, mems[1].id}
    assert index.search(_scope(), [0, 1, 0, 0, 0, 0, 0, 0], 1)[0].id == mems[3].id
    assert index.count() == 4


def test_random_vectors_match_brute_force(db, backend, index):
    rng = np.random.default_rng(42)
    mems = _create(backend, 200)
    vectors = _unit(rng, 200)
    index.ensure(SIG, DIM)
    index.upsert(_rows(mems, vectors))
    for q in _unit(rng, 5):
        expected = np.argsort(1 - vectors @ q, kind="stable")[:10]
        hits = index.search(_scope(), q, 10)
        assert [h.memory_id for h in hits] == [mems[i].memory_id for i in expected]


def test_owner_partition_isolation(db, backend, index):
    """Owner A has 5 vectors far from the query, owner B 5,000 close to it. A's KNN must still
    return A's 5: a filter applied after a global top-k would return nothing."""
    rng = np.random.default_rng(7)
    query = _unit(rng, 1)[0]
    a = _create(backend, 5, owner="A")
    b = _create(backend, 5000, owner="B")
    index.ensure(SIG, DIM)
    index.upsert(_rows(a, _near(-query, rng, 5, 0.3)))
    index.upsert(_rows(b, _near(query, rng, 5000, 0.05)))
    hits = index.search(_scope("A"), query, 5)
    assert sorted(h.memory_id for h in hits) == sorted(m.memory_id for m in a)
    assert len(index.search(_scope("A"), query, 20)) == 5
    assert all(h.distance > 1 for h in hits)  # they really are far
    b_ids = {m.memory_id for m in b}
    assert {h.memory_id for h in index.search(_scope(None), query, 20)} <= b_ids  # a global top-k has no A
    # Structural proof that A's KNN reads only A's chunks: every A vector lives in chunks whose
    # partition value is "A", and those chunks hold nothing else.
    with db.read() as conn:
        rows = conn.execute(
            "SELECT r.rowid, c.partition00 FROM vec_memories_rowids r "
            "JOIN vec_memories_chunks c ON c.chunk_id = r.chunk_id"
        ).fetchall()
    by_partition: dict[str, set[int]] = {}
    for rowid, partition in rows:
        by_partition.setdefault(partition, set()).add(rowid)
    assert by_partition["A"] == {m.memory_id for m in a}
    assert by_partition["B"] == b_ids


def test_session_expiry_and_retention_filters_apply_inside_the_knn(db, backend, index):
    rng = np.random.default_rng(3)
    query = _unit(rng, 1)[0]
    now = utcnow()
    wanted = _create(backend, 3, session_id="s1")
    other_session = _create(backend, 10, session_id="s2")
    no_session = _create(backend, 2)
    expired = _create(backend, 10, session_id="s1")
    old = _create(backend, 10, session_id="s1")
    expiring_later = _create(backend, 1, session_id="s1")
    with db.write() as conn:
        for m in expired:
            conn.execute("UPDATE memories SET expires_at = ? WHERE id = ?", (iso(now - timedelta(seconds=1)), m.id))
        for m in old:
            conn.execute("UPDATE memories SET created_at = ? WHERE id = ?", (iso(now - timedelta(days=40)), m.id))
        conn.execute(
            "UPDATE memories SET expires_at = ? WHERE id = ?", (iso(now + timedelta(days=1)), expiring_later[0].id)
        )
    reload = lambda ms: [backend.get(m.id) for m in ms]  # noqa: E731
    expired, old, expiring_later = reload(expired), reload(old), reload(expiring_later)
    index.ensure(SIG, DIM)
    # Everything out of scope is nearer to the query than what is in scope.
    index.upsert(_rows(wanted + expiring_later, _near(-query, rng, 4, 0.3)))
    index.upsert(_rows(no_session, _near(-query, rng, 2, 0.3)))
    index.upsert(_rows(other_session + expired + old, _near(query, rng, 30, 0.05)))
    scope = _scope(now=now, session_only=True, session_id="s1", created_after=now - timedelta(days=30))
    hits = index.search(scope, query, 4)
    assert {h.id for h in hits} == {m.id for m in wanted + expiring_later}
    # The same filters, one at a time.
    assert {h.id for h in index.search(_scope(now=now, session_only=True, session_id=None), query, 5)} == {
        m.id for m in no_session
    }
    not_expired = index.search(_scope(now=now, created_after=now - timedelta(days=30)), query, 50)
    assert {h.id for h in not_expired}.isdisjoint({m.id for m in expired + old})
    with_old = {h.id for h in index.search(_scope(now=now), query, 50)}
    assert {m.id for m in old} <= with_old and with_old.isdisjoint({m.id for m in expired})
    # Later, the memory that expires in a day is gone from the KNN too.
    later = _scope(now=now + timedelta(days=2), session_only=True, session_id="s1")
    assert expiring_later[0].id not in {h.id for h in index.search(later, query, 50)}
    with db.read() as conn:
        stored = dict(conn.execute("SELECT rowid, expires_us FROM vec_memories").fetchall())
    assert stored[wanted[0].memory_id] == NEVER_US
    assert stored[expiring_later[0].memory_id] == unix_us(expiring_later[0].expires_at)


def test_update_scope_moves_a_vector_to_another_session(db, backend, index):
    mems = _create(backend, 2, session_id="s1")
    index.ensure(SIG, DIM)
    index.upsert(_rows(mems, np.ones((2, DIM))))
    moved = replace(mems[0], session_id="s2")
    with db.write() as conn:
        conn.execute("UPDATE memories SET session_id = 's2' WHERE id = ?", (mems[0].id,))
    assert index.update_scope([moved]) == 1
    hits = index.search(_scope(session_only=True, session_id="s2"), np.ones(DIM), 5)
    assert [h.id for h in hits] == [mems[0].id]


# -- int8 --------------------------------------------------------------------------------------


def test_int8_stores_one_byte_per_dimension_and_ranks_the_nearest_first(db, backend):
    dim = 64
    rng = np.random.default_rng(11)
    index = LocalVectorIndex(db, quantization="int8")
    mems = _create(backend, 300)
    vectors = _unit(rng, 300, dim)
    assert index.ensure(make_signature("static", "m", dim), dim) is True
    assert _meta(db)[1] == f"static:m:{dim}:int8"
    index.upsert(_rows(mems, vectors))
    blob = index.stored_vector(mems[0].memory_id)
    assert len(blob) == dim
    # It is the int8 quantization of the (max-abs scaled) vector.
    v = vectors[0] / np.abs(vectors[0]).max()
    stored = np.frombuffer(blob, dtype=np.int8).astype(np.float32)
    assert np.corrcoef(stored, v)[0, 1] > 0.999
    with db.read() as conn:
        assert "int8[64]" in conn.execute("SELECT sql FROM sqlite_master WHERE name = 'vec_memories'").fetchone()[0]
    recall = []
    for q in _unit(rng, 10, dim):
        truth = np.argsort(1 - vectors @ q)[:10]
        hits = index.search(_scope(), q, 10)
        assert hits[0].memory_id == mems[truth[0]].memory_id
        recall.append(len({h.memory_id for h in hits} & {mems[i].memory_id for i in truth}) / 10)
    assert np.mean(recall) >= 0.9


# -- delete, pending, backfill -----------------------------------------------------------------


def test_delete_removes_the_vector(db, backend, index):
    mems = _create(backend, 3)
    index.ensure(SIG, DIM)
    index.upsert(_rows(mems, np.eye(3, DIM)))
    assert index.delete([mems[0].memory_id, 99999]).deleted == 1
    assert index.delete([mems[1]]).deleted == 1  # objects with .memory_id work too
    assert index.stored_vector(mems[0].memory_id) is None and index.count() == 1
    assert [h.id for h in index.search(_scope(), np.eye(1, DIM)[0], 5)] == [mems[2].id]
    # Inside the caller's own transaction, together with the memory row.
    with db.write() as conn:
        conn.execute("DELETE FROM memories WHERE id = ?", (mems[2].id,))
        assert delete_in(conn, [mems[2].memory_id]) == 1
    assert index.count() == 0
    with pytest.raises(TypeError):
        index.delete([mems[0].id])  # sqlite-vec is keyed by the integer memory_id


def test_orphans_never_surface_and_can_be_pruned(db, backend, index):
    mems = _create(backend, 2)
    index.ensure(SIG, DIM)
    index.upsert(_rows(mems, np.ones((2, DIM))))
    with db.write() as conn:  # a memory deleted without its vector (a failed clean-up)
        conn.execute("DELETE FROM memories WHERE id = ?", (mems[0].id,))
    assert [h.id for h in index.search(_scope(), np.ones(DIM), 5)] == [mems[1].id]
    assert index.prune_orphans() == 1 and index.count() == 1


def test_pending_and_lazy_backfill_bounds(db, backend, index):
    rng = np.random.default_rng(5)
    a = _create(backend, 10)
    b = _create(backend, 4, owner="b")
    index.ensure(SIG, DIM)
    assert index.pending_count() == 14 and index.pending_count("a") == 10
    batch = index.pending("a", 3)
    assert [m.memory_id for m in batch] == sorted((m.memory_id for m in a), reverse=True)[:3]  # newest first
    assert all(m.api_key_id == "a" and m.needs_reindex for m in batch)
    assert index.upsert(_rows(batch, _unit(rng, 3))) == 3
    assert index.pending_count("a") == 7 and index.pending_count() == 11
    assert {m.id for m in index.pending("a", 100)}.isdisjoint({m.id for m in batch})
    # Paging downwards past rows a batch could not embed.
    page = index.pending("a", 4, before_memory_id=index.pending("a", 3)[-1].memory_id)
    assert len(page) == 4 and max(m.memory_id for m in page) < min(m.memory_id for m in index.pending("a", 3))
    # A memory created after the reset (needs_reindex = 0) but without a vector is pending too.
    fresh = _create(backend, 1)[0]
    assert not fresh.needs_reindex and fresh.id in {m.id for m in index.pending("a", 1)}
    # A failed embedding marks the row and drops its stale vector.
    assert index.mark_failed([batch[0].memory_id]) == 1
    assert index.stored_vector(batch[0].memory_id) is None and batch[0].id in {m.id for m in index.pending("a", 100)}
    # The scope keeps lazy backfill to what the search could return.
    with db.write() as conn:
        conn.execute("UPDATE memories SET expires_at = ? WHERE id = ?", (iso(utcnow() - timedelta(days=1)), a[0].id))
    assert a[0].id not in {m.id for m in index.pending("a", 100, scope=_scope())}
    assert a[0].id in {m.id for m in index.pending("a", 100)}
    assert index.pending("a", 0) == [] and len(index.pending(None, 100)) == index.pending_count()
    assert b[0].id in {m.id for m in index.pending(None, 100)}


def test_upsert_skips_a_memory_edited_or_deleted_since_it_was_embedded(db, backend, index):
    mems = _create(backend, 3)
    index.ensure(SIG, DIM)
    with db.write() as conn:
        conn.execute("UPDATE memories SET content = 'edited meanwhile' WHERE id = ?", (mems[0].id,))
        conn.execute("DELETE FROM memories WHERE id = ?", (mems[1].id,))
    assert index.upsert(_rows(mems, np.ones((3, DIM)))) == 1
    assert index.count() == 1 and index.stored_vector(mems[2].memory_id) is not None
    assert mems[0].id in {m.id for m in index.pending("a", 10)}


def test_dimension_and_vector_checks(db, backend, index):
    mems = _create(backend, 1)
    index.ensure(SIG, DIM)
    with pytest.raises(DimensionMismatch) as info:
        index.search(_scope(), np.ones(DIM + 1), 3)
    assert info.value.expected == DIM and info.value.got == DIM + 1
    with pytest.raises(DimensionMismatch):
        index.upsert(_rows(mems, np.ones((1, 4))))
    for bad in (np.zeros(DIM), np.full(DIM, np.nan), []):
        with pytest.raises(VectorError):
            index.search(_scope(), bad, 3)
    with pytest.raises(VectorError):
        index.ensure(SIG, 0)
    assert index.search(_scope(), np.ones(DIM), 10**9) == []  # k is clamped, not refused


def test_without_the_extension_nothing_raises_no_such_table(tmp_path: Path):
    db = Database(tmp_path / "novec.db", vec_extension_path=str(tmp_path / "missing.so"))
    try:
        SqliteMemoryBackend(db).initialize()
        backend = SqliteMemoryBackend(db)
        _create(backend, 2)
        index = LocalVectorIndex(db)
        assert db.vec_version is None and not index.available
        assert index.count() == 0 and index.pending_count() == 2 and len(index.pending(None, 10)) == 2
        with pytest.raises(VectorUnavailable) as info:
            index.ensure(SIG, DIM)
        assert "not loaded" in str(info.value)
        with pytest.raises(VectorUnavailable):
            index.search(_scope(), np.ones(DIM), 3)
        health = index.health()
        assert health["ok"] is False and "not loaded" in health["error"]
        assert _meta(db)[3] == 0
    finally:
        db.close()


# -- batched writes, and vectors inside the memories' own transaction --------------------------


def _generation(db: Database) -> int:
    with db.read() as conn:
        row = conn.execute("SELECT value FROM sequences WHERE name = 'vec_generation'").fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("quantization", ["none", "int8"])
def test_re_upserting_replaces_each_vector_once_and_follows_an_owner_change(db, backend, quantization):
    rng = np.random.default_rng(21)
    index = LocalVectorIndex(db, quantization=quantization)
    mems = _create(backend, 40)
    index.ensure(SIG, DIM)
    first, second = _unit(rng, 40), _unit(rng, 40)
    assert index.upsert(_rows(mems, first)) == 40
    before = _generation(db)
    assert index.upsert(_rows(mems, second)) == 40  # every row exists: replaced, never doubled
    assert _generation(db) == before + 1  # one transaction for the batch
    assert index.count() == 40 and index.pending_count() == 0
    for i in (0, 17, 39):
        hit = index.search(_scope(), second[i], 1)[0]
        assert hit.memory_id == mems[i].memory_id and hit.distance == pytest.approx(0, abs=1e-2)
    # A memory that changed owner (a character rename) is moved to the new owner's partition.
    with db.write() as conn:
        conn.execute("UPDATE memories SET api_key_id = 'b' WHERE id = ?", (mems[5].id,))
    moved = backend.get(mems[5].id)
    assert index.upsert(_rows([moved], [second[5]])) == 1
    assert [h.id for h in index.search(_scope("b"), second[5], 5)] == [moved.id]
    assert moved.id not in {h.id for h in index.search(_scope("a"), second[5], 40)}
    assert index.count() == 40


def test_two_versions_of_one_memory_in_a_batch_store_only_the_current_one(db, backend, index):
    mem = _create(backend, 1)[0]
    index.ensure(SIG, DIM)
    old = replace(VectorRow.from_memory(mem, np.eye(1, DIM, 0)[0]), content="what it said before")
    current = VectorRow.from_memory(mem, np.eye(1, DIM, 1)[0])
    assert index.upsert([current, old]) == 1  # the stale one is skipped whatever its position
    assert index.count() == 1
    assert index.search(_scope(), np.eye(1, DIM, 1)[0], 1)[0].distance == pytest.approx(0, abs=1e-6)


def test_delete_in_finds_every_stored_vector_among_many_ids(db, backend, index):
    mems = _create(backend, 60)
    index.ensure(SIG, DIM)
    index.upsert(_rows(mems, np.ones((60, DIM))))
    with db.write() as conn:
        assert delete_in(conn, [m.memory_id for m in mems[:45]] + [10**9]) == 45
    assert index.count() == 15
    assert index.mark_failed([m.memory_id for m in mems[40:50]]) == 10  # 5 of them still had a vector
    assert index.count() == 10 and index.pending_count() == 50


def test_create_each_stores_the_good_drafts_and_their_vectors_in_one_transaction(db, backend, index):
    index.ensure(SIG, DIM)
    with db.write() as conn:  # a draft the database refuses, although it passed validation
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON memories WHEN NEW.content = 'refused' "
            "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
        )
    drafts = [
        NewMemory(api_key_id="a", content="kept one"),
        NewMemory(api_key_id="a", content="refused"),
        NewMemory(api_key_id="a", content="kept two", key="k"),
    ]
    seen: list = []

    def vectors(conn, stored):
        seen.extend(stored)
        rows = [VectorRow.from_memory(m, np.ones(DIM)) for m in stored if m is not None]
        assert index.upsert_in_transaction(conn, rows) == 2

    before = _generation(db)
    outcomes = backend.create_each(drafts, vectors)
    assert outcomes[0].created and outcomes[2].created and "refused by a trigger" in str(outcomes[1])
    assert seen[1] is None and [m.content for m in (seen[0], seen[2])] == ["kept one", "kept two"]
    assert seen[2].key == "k" and seen[2].memory_id == outcomes[2].memory.memory_id  # as written, not read back
    assert _generation(db) == before + 1
    assert sorted(m.content for m in backend.list(MemoryFilter(api_key_id="a"), 10, 0).data) == ["kept one", "kept two"]
    assert index.count() == 2 and index.pending_count() == 0


def test_a_failed_vector_write_inside_the_transaction_is_undone_alone(db, backend, index):
    index.ensure(SIG, DIM)
    kept = _create(backend, 1)[0]
    index.upsert(_rows([kept], [np.ones(DIM)]))
    failures: list[VectorError] = []

    def vectors(conn, stored):
        good = VectorRow.from_memory(stored[0], np.ones(DIM))
        wrong = VectorRow.from_memory(stored[1], np.ones(DIM + 1))
        try:
            index.upsert_in_transaction(conn, [good, wrong])
        except VectorError as exc:  # the caller's transaction goes on
            failures.append(exc)
            index.mark_failed_in_transaction(conn, [m for m in stored if m is not None])

    results = backend.create_many(
        [NewMemory(api_key_id="a", content="x"), NewMemory(api_key_id="a", content="y")], vectors
    )
    assert isinstance(failures[0], DimensionMismatch)
    assert index.count() == 1  # neither new vector, the old one untouched
    flagged = {m.id for m in index.pending("a", 10)}
    assert flagged == {r.id for r in results}
    assert all(backend.get(r.id).needs_reindex for r in results)


def test_a_vector_that_changes_owner_leaves_the_old_owners_cached_block(db, backend):
    index = LocalVectorIndex(db, cache_bytes=10_000_000)
    mems = _create(backend, 3)
    index.ensure(SIG, DIM)
    index.upsert(_rows(mems, np.eye(3, DIM)))
    assert len(index.search(_scope("a"), np.eye(1, DIM)[0], 5)) == 3  # loads owner a's block
    assert mems[0].memory_id in index.cache.owner_block("a").slots
    with db.write() as conn:
        conn.execute("UPDATE memories SET api_key_id = 'b' WHERE id = ?", (mems[0].id,))
    index.upsert(_rows([backend.get(mems[0].id)], np.eye(1, DIM)))
    assert mems[0].memory_id not in index.cache.owner_block("a").slots
    assert [h.id for h in index.search(_scope("b"), np.eye(1, DIM)[0], 5)] == [mems[0].id]
