"""Memories kept with no age limit (`keep`) in every tier's retention filter: the sqlite-vec
KNN (vec0 and the in-memory matrices), Qdrant's search filter, and Qdrant cleanup, which
never deletes a kept point for its age (expiry still removes it); retentionDays 0 deletes
expired points only."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from memsvc.kernel.models import NewMemory, SearchScope, utcnow
from memsvc.kernel.vector_index import VectorRow
from memsvc.storage.database import Database, iso
from memsvc.storage.sqlite_backend import SqliteMemoryBackend
from memsvc.storage.vector_index import LocalVectorIndex
from memsvc.vectors.qdrant import QdrantIndex

pytestmark = [
    pytest.mark.filterwarnings("ignore:Local mode performs exact:UserWarning"),
    pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning"),
]
DIM = 8
SIG = f"static:test-model:{DIM}"
NOW = utcnow()


def _unit(seed: int, n: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("cache_mb", [0, 16])  # vec0 directly, and the in-memory matrices
def test_sqlite_vec_finds_a_kept_memory_older_than_retention(tmp_path, cache_mb):
    db = Database(tmp_path / "memsvc.db")
    try:
        backend = SqliteMemoryBackend(db)
        backend.initialize()
        kept, aged = (
            backend.create(NewMemory(api_key_id="a", content=c, keep=k)) for c, k in (("kept", True), ("aged", False))
        )
        with db.write() as conn:
            conn.execute("UPDATE memories SET created_at = ?", (iso(NOW - timedelta(days=400)),))
        memories = [backend.get(kept.id), backend.get(aged.id)]
        assert [m.keep for m in memories] == [True, False]
        index = LocalVectorIndex(db, cache_bytes=cache_mb * 1_000_000)
        index.ensure(SIG, DIM)
        vectors = _unit(1, 2)
        index.upsert([VectorRow.from_memory(m, v) for m, v in zip(memories, vectors)])
        scope = SearchScope(api_key_id="a", now=NOW, created_after=NOW - timedelta(days=30))
        assert [h.id for h in index.search(scope, vectors[1], 5)] == [kept.id]
        assert {h.id for h in index.search(replace(scope, created_after=None), vectors[1], 5)} == {kept.id, aged.id}
    finally:
        db.close()


def _row(vector, created, keep=False, expires=None) -> VectorRow:
    return VectorRow(
        memory_id=int(uuid.uuid4().int % 10**9),
        id=str(uuid.uuid4()),
        api_key_id="a",
        session_id=None,
        key=None,
        content="text",
        metadata={},
        created_at=created,
        expires_at=expires,
        vector=np.asarray(vector, dtype=np.float32),
        keep=keep,
    )


def test_qdrant_search_and_cleanup_respect_keep(tmp_path):
    index = QdrantIndex.connect(path=tmp_path / "qdrant", collection="mem_keep")
    try:
        v = _unit(2, 4)
        old = NOW - timedelta(days=400)
        kept, aged = _row(v[0], old, keep=True), _row(v[1], old)
        kept_expired = _row(v[2], old, keep=True, expires=NOW - timedelta(seconds=5))
        fresh = _row(v[3], NOW)
        index.upsert([kept, aged, kept_expired, fresh])
        scope = SearchScope(api_key_id="a", now=NOW, created_after=NOW - timedelta(days=30))
        assert {h.id for h in index.search(scope, v[1], 10)} == {kept.id, fresh.id}
        assert index.cleanup(0, now=NOW) == 1  # no age limit: the expired point only
        assert index.cleanup(30, now=NOW) == 1  # the aged one; the kept one stays
        assert {p.id for p in index.client.scroll("mem_keep", limit=10)[0]} == {kept.id, fresh.id}
    finally:
        index.close()


def test_the_count_of_memories_hidden_for_age_stops_at_its_cap(tmp_path):
    from memsvc.storage.sqlite_backend import AGED_COUNT_CAP

    db = Database(tmp_path / "memsvc.db")
    try:
        backend = SqliteMemoryBackend(db)
        backend.initialize()
        backend.create_many([NewMemory(api_key_id="a", content=f"note {i}") for i in range(AGED_COUNT_CAP + 3)])
        backend.create(NewMemory(api_key_id="a", content="kept", keep=True))
        with db.write() as conn:
            conn.execute("UPDATE memories SET created_at = ?", (iso(NOW - timedelta(days=400)),))
        scope = SearchScope(api_key_id="a", now=NOW, created_after=NOW - timedelta(days=30))
        assert backend.count_aged(scope) == AGED_COUNT_CAP == 10_000
        assert backend.count_aged(replace(scope, api_key_id="b")) == 0
        assert backend.count_aged(replace(scope, created_after=None)) == 0
    finally:
        db.close()
