"""The Qdrant tier through qdrant-client's local mode in a tmp folder: the same
client API a server gets (no Qdrant server binary is installable here)."""

from __future__ import annotations

import socket
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import models as qm

from memsvc.core.settings.qdrant import QdrantSettings
from memsvc.kernel.models import SearchScope, utcnow
from memsvc.kernel.vector_index import DimensionMismatch, VectorIndex, VectorRow, VectorUnavailable
from memsvc.vectors.qdrant import (
    KIND,
    QdrantIndex,
    clamp_top_k,
    quantization_config,
    search_params,
)

# Local mode says payload indexes and search params have no effect there (it searches
# exactly); memsvc silences these at import, pytest re-enables warnings per test.
pytestmark = [
    pytest.mark.filterwarnings("ignore:Local mode performs exact:UserWarning"),
    pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning"),
    pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection:UserWarning"),
]

DIM = 16
NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "qdrant"


@pytest.fixture
def index(folder: Path):
    idx = QdrantIndex.connect(path=folder, collection="mem_test")
    yield idx
    idx.close()


def _unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


_counter = iter(range(1, 10**9))


def _row(
    vector,
    owner: str = "a",
    session: str | None = None,
    created: datetime = NOW,
    expires: datetime | None = None,
    content: str = "text",
) -> VectorRow:
    return VectorRow(
        memory_id=next(_counter),
        id=str(uuid.uuid4()),
        api_key_id=owner,
        session_id=session,
        key=f"k:{content}",
        content=content,
        metadata={"category": "preference"},
        created_at=created,
        expires_at=expires,
        vector=np.asarray(vector, dtype=np.float32),
    )


def _scope(owner: str | None = "a", **kw) -> SearchScope:
    return SearchScope(api_key_id=owner, now=kw.pop("now", NOW), **kw)


def test_upsert_creates_the_collection_with_the_real_dimension_and_payload(index):
    assert isinstance(index, VectorIndex)
    assert index.collection_info()["exists"] is False and index.count() == 0
    assert index.search(_scope(), np.ones(DIM), 5) == []  # no collection yet: nothing, no error
    row = _row(np.ones(DIM), session="s1", expires=NOW + timedelta(hours=1), content="dark mode")
    assert index.upsert([row]) == 1
    info = index.collection_info()
    assert (info["exists"], info["size"], info["distance"], info["points_count"]) == (True, DIM, "Cosine", 1)
    [point] = index.client.retrieve("mem_test", ids=[row.id], with_payload=True)
    assert point.payload == {
        "kind": KIND,
        "memoryId": row.id,
        "memoryRowId": row.memory_id,
        "apiKeyId": "a",
        "sessionId": "s1",
        "key": "k:dark mode",
        "content": "dark mode",
        "metadata": {"category": "preference"},
        "createdAtUnix": int(NOW.timestamp()),
        "expiresAtUnix": int(NOW.timestamp()) + 3600,
        "keep": False,
    }
    # Upserting the same id replaces the point.
    index.upsert([VectorRow(**{**row.__dict__, "content": "light mode", "key": "k:light"})])
    assert index.count() == 1
    assert index.client.retrieve("mem_test", ids=[row.id])[0].payload["content"] == "light mode"


def test_search_filters_by_owner_and_session(index):
    rng = np.random.default_rng(2)
    q = _unit(rng, 1)[0]
    mine = [_row(v, session="s1") for v in _unit(rng, 3)]
    mine_other_session = [_row(v, session="s2") for v in _unit(rng, 2)]
    mine_no_session = [_row(v) for v in _unit(rng, 2)]
    theirs = [_row(q, owner="b", session="s1") for _ in range(5)]  # identical to the query
    index.upsert(mine + mine_other_session + mine_no_session + theirs)
    all_mine = {r.id for r in mine + mine_other_session + mine_no_session}
    assert {h.id for h in index.search(_scope("a"), q, 20)} == all_mine
    assert {h.id for h in index.search(_scope("a", session_only=True, session_id="s1"), q, 20)} == {r.id for r in mine}
    assert {h.id for h in index.search(_scope("a", session_only=True, session_id=None), q, 20)} == {
        r.id for r in mine_no_session
    }
    assert {h.id for h in index.search(_scope("b"), q, 20)} == {r.id for r in theirs}
    hits = index.search(_scope(None), q, 5)  # global scope: everyone's
    assert {h.id for h in hits} == {r.id for r in theirs}
    assert all(h.score == pytest.approx(1.0, abs=1e-5) and h.distance == pytest.approx(0.0, abs=1e-5) for h in hits)
    assert {h.memory_id for h in hits} == {r.memory_id for r in theirs}


def test_search_ranks_by_cosine_and_applies_expiry_and_retention(index):
    rng = np.random.default_rng(4)
    vectors = _unit(rng, 40)
    rows = [_row(v) for v in vectors]
    expired = _row(vectors[0], expires=NOW - timedelta(minutes=1))
    old = _row(vectors[0], created=NOW - timedelta(days=40))
    index.upsert(rows + [expired, old])
    q = _unit(rng, 1)[0]
    scope = _scope(created_after=NOW - timedelta(days=30))
    hits = index.search(scope, q, 10)
    expected = [rows[i].id for i in np.argsort(1 - vectors @ q)[:10]]
    assert [h.id for h in hits] == expected
    for h in hits:
        v = vectors[[r.id for r in rows].index(h.id)]
        assert h.score == pytest.approx(float(v @ q), abs=1e-5) and h.distance == pytest.approx(1 - h.score)
    ids = {h.id for h in index.search(scope, vectors[0], 20)}
    assert rows[0].id in ids and expired.id not in ids and old.id not in ids
    assert old.id in {h.id for h in index.search(_scope(), vectors[0], 20)}  # no retention given


def test_top_k_is_clamped_to_1_20(index):
    rng = np.random.default_rng(6)
    index.upsert([_row(v) for v in _unit(rng, 30)])
    q = _unit(rng, 1)[0]
    assert len(index.search(_scope(), q, 50)) == 20
    assert len(index.search(_scope(), q, 0)) == 1
    assert len(index.search(_scope(), q, -3)) == 1
    assert len(index.search_points(_scope(), q, 7)) == 7
    assert (clamp_top_k(None), clamp_top_k(21), clamp_top_k(1)) == (20, 20, 1)


def test_delete_removes_the_point_best_effort(index, folder):
    rng = np.random.default_rng(8)
    rows = [_row(v) for v in _unit(rng, 4)]
    assert index.delete([rows[0].id]).deleted == 0  # no collection yet
    index.upsert(rows)
    assert index.delete([rows[0].id, str(uuid.uuid4())]).deleted == 1
    assert index.delete([rows[1]]).deleted == 1  # objects with .id
    assert index.delete([rows[2].memory_id]).deleted == 1  # integer memory ids via the payload
    assert {p.id for p in index.client.retrieve("mem_test", ids=[r.id for r in rows])} == {rows[3].id}
    assert {h.id for h in index.search(_scope(), rows[0].vector, 20)} == {rows[3].id}
    # Best effort: a failure is reported, not raised, unless the caller asks.
    index.close()
    result = index.delete([rows[3].id])
    assert not result.ok and result.deleted == 0 and "qdrant delete failed" in result.error
    with pytest.raises(VectorUnavailable):
        index.delete([rows[3].id], raise_errors=True)


def test_cleanup_deletes_expired_and_old_points_and_returns_the_count(index):
    rng = np.random.default_rng(9)
    v = _unit(rng, 8)
    keep = [_row(v[0]), _row(v[1], expires=NOW + timedelta(days=1)), _row(v[2], created=NOW - timedelta(days=29))]
    gone = [
        _row(v[3], expires=NOW - timedelta(seconds=5)),
        _row(v[4], created=NOW - timedelta(days=31)),
        _row(v[5], created=NOW - timedelta(days=400), expires=NOW - timedelta(days=1)),
    ]
    other_owner_old = _row(v[6], owner="b", created=NOW - timedelta(days=31))
    assert index.cleanup(30, now=NOW) == 0  # no collection: nothing to delete
    index.upsert(keep + gone + [other_owner_old])
    assert index.cleanup(30, now=NOW, api_key_id="a") == 3
    left = {p.id for p in index.client.scroll("mem_test", limit=100)[0]}
    assert left == {r.id for r in keep} | {other_owner_old.id}
    assert index.cleanup(30, now=NOW) == 1
    assert index.cleanup(30, now=NOW) == 0
    assert index.count() == 3


def test_health_reports_readiness_with_latency(index):
    health = index.health()
    assert health["ok"] is True and health["error"] is None and health["mode"] == "local"
    assert isinstance(health["latency_ms"], float) and health["latency_ms"] >= 0
    assert health["collection_exists"] is False and health["points_count"] == 0
    index.upsert([_row(np.ones(DIM)), _row(-np.ones(DIM))])
    health = index.health()
    assert health["collection_exists"] is True and health["points_count"] == 2


def test_health_of_an_unreachable_server_reports_the_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    idx = QdrantIndex.connect(host="127.0.0.1", port=port, api_key="secret-key-1234", timeout=2)
    try:
        health = idx.health()
        assert health["ok"] is False and health["mode"] == "server" and health["latency_ms"] >= 0
        assert health["error"] and "secret-key-1234" not in health["error"]
        assert "secret-key-1234" not in repr(idx)
        with pytest.raises(VectorUnavailable):
            idx.search(_scope(), np.ones(DIM), 3)
    finally:
        idx.close()


def test_dimension_mismatch_raises(index):
    index.upsert([_row(np.ones(DIM))])
    with pytest.raises(DimensionMismatch) as info:
        index.upsert([_row(np.ones(DIM + 8))])
    assert (info.value.expected, info.value.got) == (DIM, DIM + 8) and "mem_test" in str(info.value)
    with pytest.raises(DimensionMismatch):
        index.search(_scope(), np.ones(384), 5)
    with pytest.raises(DimensionMismatch):
        index.ensure("remote:other:384", 384)
    assert index.ensure("static:m:16", DIM) is False
    assert index.count() == 1


def test_ensure_creates_once(folder):
    idx = QdrantIndex.connect(path=folder, collection="fresh")
    try:
        assert idx.ensure("static:m:16", DIM) is True
        assert idx.ensure("static:m:16", DIM) is False
        info = idx.collection_info()
        assert info["size"] == DIM and info["signature"] == "static:m:16" and info["quantization"] == "none"
    finally:
        idx.close()


@pytest.mark.parametrize("mode", ["int8", "binary"])
def test_quantization_is_configured_and_search_still_finds_the_nearest(folder, mode):
    rng = np.random.default_rng(12)
    idx = QdrantIndex.connect(path=folder, collection=f"q_{mode}", quantization=mode)
    try:
        vectors = _unit(rng, 50)
        rows = [_row(v) for v in vectors]
        idx.upsert(rows)
        assert idx.collection_info()["quantization"] == mode
        for q in _unit(rng, 5):
            assert idx.search(_scope(), q, 5)[0].id == rows[int(np.argmax(vectors @ q))].id
    finally:
        idx.close()
    config = quantization_config(mode)
    if mode == "int8":
        assert config == qm.ScalarQuantization(
            scalar=qm.ScalarQuantizationConfig(type=qm.ScalarType.INT8, quantile=0.99, always_ram=True)
        )
    else:
        assert isinstance(config, qm.BinaryQuantization) and config.binary.always_ram is True
    assert search_params(mode).quantization.rescore is True
    assert quantization_config("none") is None and search_params("none") is None


def test_changing_quantization_updates_an_existing_collection(folder):
    first = QdrantIndex.connect(path=folder, collection="c")
    first.ensure("s:m:16", DIM)
    first.close()
    second = QdrantIndex.connect(path=folder, collection="c", quantization="int8")
    try:
        assert second.ensure("s:m:16", DIM) is False
        assert second.collection_info()["quantization"] == "int8"
    finally:
        second.close()


def test_local_folder_persists_and_settings_resolve_it_under_the_data_dir(tmp_path: Path):
    settings = QdrantSettings(local_path="vectors/qdrant", collection="persisted")
    row = _row(np.ones(DIM))
    idx = QdrantIndex.from_settings(settings, tmp_path)
    idx.upsert([row])
    idx.close()
    assert (tmp_path / "vectors" / "qdrant").is_dir()
    again = QdrantIndex.from_settings(settings, tmp_path)
    try:
        assert [h.id for h in again.search(_scope(), np.ones(DIM), 3)] == [row.id]
    finally:
        again.close()
    memory = QdrantIndex.from_settings(QdrantSettings(local_path=":memory:"), tmp_path)
    try:
        assert memory.health()["ok"] is True and memory.collection == "omniroute_memory"
    finally:
        memory.close()


def test_real_clock_expiry_boundary(index):
    now = utcnow()
    soon = _row(np.ones(DIM), expires=now + timedelta(seconds=30))
    index.upsert([soon])
    assert [h.id for h in index.search(SearchScope("a", now), np.ones(DIM), 3)] == [soon.id]
    assert index.search(SearchScope("a", now + timedelta(minutes=2)), np.ones(DIM), 3) == []


@pytest.mark.parametrize("host", ["169.254.169.254", "http://[fe80::1]"])
def test_a_server_at_a_metadata_address_is_refused_before_any_call(host, tmp_path: Path):
    with pytest.raises(VectorUnavailable) as info:
        QdrantIndex.from_settings(QdrantSettings(host=host, api_key="secret-key-1234"), tmp_path)
    assert "link-local" in str(info.value) and "secret-key-1234" not in str(info.value)
