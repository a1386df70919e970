"""The SQLite storage layer: connections, migrations, FTS5 sync and the SQLite backend.
Every test runs against a real database file under tmp_path."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsvc.kernel.backend import MemoryBackend
from memsvc.kernel.errors import ConflictError, StorageFullError, StorageVersionError
from memsvc.kernel.models import MemoryFilter, MemoryPatch, NewMemory
from memsvc.storage.database import Database, iso, parse_iso
from memsvc.storage.migrations import (
    apply_migrations,
    available_migrations,
    current_version,
    latest_version,
)
from memsvc.storage.sqlite_backend import SqliteMemoryBackend

# -- helpers ---------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path):
    database = Database(tmp_path / "data" / "memsvc.db")
    yield database
    database.close()


@pytest.fixture
def backend(db: Database) -> SqliteMemoryBackend:
    b = SqliteMemoryBackend(db)
    b.initialize()
    return b


def _new(content: str, api_key_id: str = "k1", **kw) -> NewMemory:
    return NewMemory(api_key_id=api_key_id, content=content, **kw)


def _fts_rowids(db: Database, query: str) -> list[int]:
    with db.read() as conn:
        rows = conn.execute("SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid", (query,)).fetchall()
    return [r[0] for r in rows]


def _fts_size(db: Database) -> tuple[int, float]:
    with db.read() as conn:
        return tuple(conn.execute("SELECT count(*), total(length(block)) FROM memory_fts_data").fetchall()[0])


def _schema(db: Database) -> list[tuple]:
    with db.read() as conn:
        return conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()


def _table_names(db: Database) -> set[str]:
    return {name for kind, name, _ in _schema(db) if kind == "table"}


# -- database and migrations -----------------------------------------------------------------


def test_fresh_database_migrates_and_loads_sqlite_vec(db: Database):
    assert db.path.parent.is_dir()  # the parent folder was created
    assert current_version(db) == 0
    every = [version for version, _, _ in available_migrations()]
    assert every == list(range(1, len(every) + 1))
    assert apply_migrations(db) == every
    assert current_version(db) == latest_version() == every[-1]
    assert db.vec_version == "v0.1.9" and db.vec_error is None
    with db.read() as conn:
        assert conn.execute("SELECT vec_version()").fetchall() == [("v0.1.9",)]
        assert conn.execute("SELECT id, vec_loaded FROM memory_vec_meta").fetchall() == [(1, 0)]
    with db.write() as conn:
        assert conn.execute("SELECT vec_version()").fetchall() == [("v0.1.9",)]
    tables = _table_names(db)
    assert {"memories", "memory_fts", "memory_vec_meta", "settings", "schema_migrations"} <= tables
    assert "vec_memories" not in tables


def test_migrations_ship_as_package_data():
    versions = [(v, name) for v, name, _ in available_migrations()]
    assert versions[0] == (1, "initial")
    assert "CREATE TABLE memories" in available_migrations()[0][2]


def test_vec_load_failure_is_recorded_not_fatal(tmp_path: Path):
    database = Database(tmp_path / "m.db", vec_extension_path=str(tmp_path / "missing_vec0"))
    try:
        assert database.vec_version is None and database.vec_error
        backend = SqliteMemoryBackend(database)
        backend.initialize()
        backend.create(_new("keyword search still works"))
        assert len(_fts_rowids(database, "keyword")) == 1
        assert backend.health()["ok"] is True
    finally:
        database.close()


def test_migrating_twice_applies_nothing_and_keeps_data(tmp_path: Path):
    path = tmp_path / "m.db"
    first = Database(path)
    assert apply_migrations(first) == [v for v, _, _ in available_migrations()]
    created = SqliteMemoryBackend(first).create(_new("kept across restarts"))
    first.close()

    second = Database(path)
    try:
        assert apply_migrations(second) == []
        assert apply_migrations(second) == []
        assert SqliteMemoryBackend(second).get(created.id).content == "kept across restarts"
        with second.read() as conn:
            assert conn.execute("SELECT version, name FROM schema_migrations").fetchall() == [
                (v, name) for v, name, _ in available_migrations()
            ]
    finally:
        second.close()


def test_database_from_a_newer_memsvc_is_refused_unchanged(backend: SqliteMemoryBackend, db: Database):
    backend.create(_new("precious"))
    with db.write() as conn:
        conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 'x')")
    schema_before = _schema(db)
    with db.read() as conn:
        rows_before = conn.execute("SELECT * FROM memories").fetchall()

    with pytest.raises(StorageVersionError) as err:
        apply_migrations(db)
    message = str(err.value)
    assert "999" in message and f"knows up to {latest_version()}" in message and "--data-dir" in message
    assert err.value.reason == "SCHEMA_TOO_NEW"
    assert _schema(db) == schema_before
    with db.read() as conn:
        assert conn.execute("SELECT * FROM memories").fetchall() == rows_before
        assert conn.execute("SELECT max(version) FROM schema_migrations").fetchall() == [(999,)]


def test_stamped_future_database_gets_no_tables_created(db: Database):
    with db.write() as conn:
        conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)")
        conn.execute("INSERT INTO schema_migrations VALUES (999, 'future', 'x')")
    with pytest.raises(StorageVersionError):
        SqliteMemoryBackend(db).initialize()
    assert _table_names(db) == {"schema_migrations"}


def test_connections_use_wal_foreign_keys_busy_timeout_and_synchronous(tmp_path: Path):
    database = Database(tmp_path / "m.db", synchronous="FULL", busy_timeout_ms=1234)
    try:
        with database.write() as conn:
            writer = conn.execute("PRAGMA journal_mode").fetchall()[0][0]
        with database.read() as conn:
            assert conn.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
            assert conn.execute("PRAGMA foreign_keys").fetchall()[0][0] == 1
            assert conn.execute("PRAGMA busy_timeout").fetchall()[0][0] == 1234
            assert conn.execute("PRAGMA synchronous").fetchall()[0][0] == 2  # FULL
        assert writer == "wal"
    finally:
        database.close()
    with pytest.raises(ValueError):
        Database(tmp_path / "other.db", synchronous="NORMAL; DROP TABLE memories")


def test_write_rolls_back_on_exception_and_readers_cannot_write(backend: SqliteMemoryBackend, db: Database):
    with pytest.raises(RuntimeError, match="boom"):
        with db.write() as conn:
            conn.execute("INSERT INTO settings (key, value) VALUES ('enabled', 'true')")
            raise RuntimeError("boom")
    with db.read() as conn:
        assert conn.execute("SELECT count(*) FROM settings").fetchall() == [(0,)]
        with pytest.raises(Exception, match="readonly|read-only|query_only"):
            conn.execute("INSERT INTO settings (key, value) VALUES ('enabled', 'true')")
    with (
        db.write() as outer
    ):  # nested: joins the outer write as a savepoint (tests/contract/test_store_rules_contract.py)
        with db.write() as inner:
            assert inner is outer


def test_a_savepoint_undoes_its_part_and_the_transaction_goes_on(db: Database):
    with db.write() as conn:
        conn.execute("CREATE TABLE parts (x TEXT)")
        conn.execute("INSERT INTO parts VALUES ('kept')")
        with pytest.raises(RuntimeError, match="part failed"):
            with db.savepoint(conn):
                conn.execute("INSERT INTO parts VALUES ('undone')")
                raise RuntimeError("part failed")
        with db.savepoint(conn):
            with db.savepoint(conn):  # nested
                conn.execute("INSERT INTO parts VALUES ('nested')")
    with db.read() as conn:
        assert sorted(r[0] for r in conn.execute("SELECT x FROM parts")) == ["kept", "nested"]


def test_nesting_on_sqlite_reads_beside_writes_and_counts_each_transaction_once(db: Database):
    """The SQLite side of memsvc.storage.transactions: a read nested in a write reads its own
    snapshot on this thread's reader (not the write's rows); a write nested in a read commits
    alone and renew_read() shows it; nested reads share one transaction; rollback hooks run
    only when the write does not commit."""
    with db.write() as conn:
        conn.execute("CREATE TABLE items (x TEXT)")
    reads, commits, calls = db.read_transactions, db.commits, []
    with db.write() as conn:
        conn.execute("INSERT INTO items VALUES ('a')")
        db.on_rollback(lambda: calls.append("not committed"))
        with db.read() as reader:
            assert reader is not conn and reader.execute("SELECT count(*) FROM items").fetchone()[0] == 0
    with db.read() as reader:
        assert reader.execute("SELECT count(*) FROM items").fetchone()[0] == 1
        with db.write() as conn:
            conn.execute("INSERT INTO items VALUES ('b')")
        with db.read() as inner:
            assert inner is reader and inner.execute("SELECT count(*) FROM items").fetchone()[0] == 1
        db.renew_read()
        assert reader.execute("SELECT count(*) FROM items").fetchone()[0] == 2
    assert calls == [] and db.commits == commits + 2 and db.read_transactions == reads + 2
    with pytest.raises(RuntimeError, match="only valid inside"):
        db.on_rollback(lambda: None)


def test_a_full_database_inside_a_savepoint_reports_storage_full(db: Database):
    """When SQLite rolls the whole transaction back (the size limit, like a full disk), the
    savepoint has nothing to return to: the write reports StorageFullError, not "no such
    savepoint", and nothing of the block is stored."""
    with db.write() as conn:
        conn.execute("CREATE TABLE blobs (x BLOB)")
    with db.read() as conn:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    with db.write() as conn:
        conn.execute(f"PRAGMA max_page_count = {pages + 5}")
    try:
        with pytest.raises(StorageFullError):
            with db.write() as conn:
                conn.execute("INSERT INTO blobs VALUES (zeroblob(1000))")
                with db.savepoint(conn):
                    conn.execute("INSERT INTO blobs VALUES (zeroblob(1000000))")
    finally:
        with db.write() as conn:
            conn.execute("PRAGMA max_page_count = 4294967294")
    with db.read() as conn:
        assert conn.execute("SELECT count(*) FROM blobs").fetchone()[0] == 0


def test_close_is_idempotent_and_final(tmp_path: Path):
    database = Database(tmp_path / "m.db")
    with database.read():
        pass
    database.close()
    database.close()
    with pytest.raises(RuntimeError, match="closed"):
        with database.read():
            pass
    with pytest.raises(RuntimeError, match="closed"):
        with database.write():
            pass


def test_integrity_check_is_ok(backend: SqliteMemoryBackend, db: Database):
    for i in range(20):
        backend.create(_new(f"memory number {i}", key=f"k{i % 5}"))
    assert db.integrity_check() == "ok"
    assert backend.health()["integrity"] == "ok"


def test_fts_index_matches_the_content_table(backend: SqliteMemoryBackend, db: Database):
    for i in range(10):
        created = backend.create(_new(f"note {i} about zebras", key=f"k{i % 3}"))
        backend.update(created.id, MemoryPatch(content=f"note {i} about giraffes"))
    backend.touch([m.id for m in backend.list(MemoryFilter(), 100, 0).data])
    with db.write() as conn:  # FTS5 raises if the index disagrees with memories
        conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES ('integrity-check', 1)")


def test_health_is_cheap_and_reports_vec(backend: SqliteMemoryBackend):
    health = backend.health()
    assert health["ok"] is True
    assert health["vec_version"] == "v0.1.9"
    assert health["integrity"] == "unchecked"
    backend.shutdown()
    assert backend.health()["ok"] is False


def test_backend_satisfies_the_protocol(backend: SqliteMemoryBackend):
    assert isinstance(backend, MemoryBackend)
    assert backend.name == "sqlite"


# -- FTS5 sync -------------------------------------------------------------------------------


def test_insert_update_delete_keep_fts_in_sync(backend: SqliteMemoryBackend, db: Database):
    created = backend.create(_new("the aardvark sleeps", key="animal"))
    memory_id = backend.get(created.id).memory_id
    assert _fts_rowids(db, "aardvark") == [memory_id]
    assert _fts_rowids(db, "animal") == [memory_id]  # key is indexed too

    backend.update(created.id, MemoryPatch(content="the pangolin sleeps"))
    assert _fts_rowids(db, "aardvark") == []
    assert _fts_rowids(db, "pangolin") == [memory_id]

    backend.update(created.id, MemoryPatch(key="mammal"))
    assert _fts_rowids(db, "animal") == []
    assert _fts_rowids(db, "mammal") == [memory_id]

    assert backend.delete(created.id) is True
    assert _fts_rowids(db, "pangolin") == []
    assert _fts_rowids(db, "mammal") == []
    assert backend.delete(created.id) is False


def test_upsert_reindexes_new_content(backend: SqliteMemoryBackend, db: Database):
    first = backend.create(_new("editor is emacs", key="pref:editor"))
    backend.create(_new("editor is neovim", key="pref:editor"))
    memory_id = backend.get(first.id).memory_id
    assert _fts_rowids(db, "emacs") == []
    assert _fts_rowids(db, "neovim") == [memory_id]


def test_tokenizer_stems_and_drops_diacritics(backend: SqliteMemoryBackend, db: Database):
    created = backend.create(_new("Walking to the café"))
    memory_id = backend.get(created.id).memory_id
    assert _fts_rowids(db, "walk") == [memory_id]  # porter
    assert _fts_rowids(db, "cafe") == [memory_id]  # remove_diacritics 2


def _fts_growth_from_touches(backend: SqliteMemoryBackend, db: Database) -> tuple:
    ids = [backend.create(_new(f"frequently retrieved memory {i}")).id for i in range(3)]
    before = _fts_size(db)
    for _ in range(200):
        backend.touch(ids)
    return before, _fts_size(db)


def test_touch_does_not_rewrite_the_fts_index(backend: SqliteMemoryBackend, db: Database):
    before, after = _fts_growth_from_touches(backend, db)
    assert after == before
    memories = backend.list(MemoryFilter(), 10, 0).data
    assert {m.access_count for m in memories} == {200}
    assert all(m.last_accessed_at is not None for m in memories)
    assert len(_fts_rowids(db, "retrieved")) == 3


def test_same_measure_grows_without_the_trigger_guard(tmp_path: Path):
    """Proves the previous test can fail: with the update trigger unguarded (the reference's
    defect), the same 200 touches rewrite the index and the measure changes."""
    database = Database(tmp_path / "unguarded.db")
    try:
        backend = SqliteMemoryBackend(database)
        backend.initialize()
        with database.write() as conn:
            conn.execute("DROP TRIGGER memory_fts_au")
            conn.execute(
                "CREATE TRIGGER memory_fts_au AFTER UPDATE ON memories BEGIN "
                "INSERT INTO memory_fts (memory_fts, rowid, content, key) "
                "VALUES ('delete', old.memory_id, old.content, old.key); "
                "INSERT INTO memory_fts (rowid, content, key) VALUES (new.memory_id, new.content, new.key); "
                "END"
            )
        before, after = _fts_growth_from_touches(backend, database)
        assert after != before
    finally:
        database.close()


def test_touch_counts_each_return_and_ignores_unknown_ids(backend: SqliteMemoryBackend):
    created = backend.create(_new("x y z"))
    backend.touch([])
    backend.touch(["no-such-id", created.id, created.id])  # returned twice (coalesced batch)
    assert backend.get(created.id).access_count == 2
    backend.touch({created.id: 3, "no-such-id": 1})
    assert backend.get(created.id).access_count == 5


# -- create / upsert / memory_id -------------------------------------------------------------


def test_upsert_on_owner_and_key_merges_metadata(backend: SqliteMemoryBackend):
    expiry = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    first = backend.create(
        _new("I prefer tabs", key="pref:indent", type="factual", session_id="s1", metadata={"a": 1, "b": 1})
    )
    second = backend.create(
        _new(
            "I prefer spaces",
            key="pref:indent",
            type="semantic",
            session_id="s2",
            metadata={"b": 2, "c": 3},
            expires_at=expiry,
        )
    )
    assert first.created is True and second.created is False and second.id == first.id

    stored = backend.get(first.id)
    assert stored.content == "I prefer spaces"
    assert stored.metadata == {"a": 1, "b": 2, "c": 3}
    assert (stored.type, stored.session_id, stored.expires_at) == ("semantic", "s2", expiry)
    assert stored.updated_at >= stored.created_at
    assert backend.list(MemoryFilter(api_key_id="k1"), 10, 0).total == 1

    other_owner = backend.create(_new("I prefer tabs", api_key_id="k2", key="pref:indent"))
    assert other_owner.created is True and other_owner.id != first.id
    assert backend.list(MemoryFilter(), 10, 0).total == 2


def test_memories_without_key_never_upsert(backend: SqliteMemoryBackend):
    a = backend.create(_new("same text"))
    b = backend.create(_new("same text"))
    assert a.id != b.id and a.created and b.created


def test_memory_id_is_unique_and_increasing(backend: SqliteMemoryBackend):
    ids = [backend.create(_new(f"m{i}")).id for i in range(10)]
    memory_ids = [backend.get(i).memory_id for i in ids]
    assert memory_ids == sorted(set(memory_ids))
    assert memory_ids[0] >= 1
    backend.delete(ids[4])
    newest = backend.get(backend.create(_new("after delete")).id).memory_id
    assert newest > max(memory_ids[:4] + memory_ids[5:])


def test_memory_id_is_never_reused_after_deleting_the_newest_row(backend: SqliteMemoryBackend, db: Database):
    first = backend.create(_new("first"))
    newest = backend.create(_new("newest"))
    with db.read() as conn:
        newest_mid = conn.execute("SELECT memory_id FROM memories WHERE id = ?", (newest.id,)).fetchone()[0]
    assert backend.delete(newest.id)
    after = backend.create(_new("after the delete"))
    with db.read() as conn:
        after_mid = conn.execute("SELECT memory_id FROM memories WHERE id = ?", (after.id,)).fetchone()[0]
    assert after_mid > newest_mid and first.id != after.id


def test_create_stores_every_field(backend: SqliteMemoryBackend):
    expiry = datetime(2030, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    created = backend.create(
        _new(
            "Ünïcode ✓ content",
            session_id="s",
            type="procedural",
            key="how:to",
            metadata={"nested": {"x": [1, "ü"]}},
            expires_at=expiry,
        )
    )
    m = backend.get(created.id)
    assert (m.api_key_id, m.session_id, m.type, m.key, m.content) == (
        "k1",
        "s",
        "procedural",
        "how:to",
        "Ünïcode ✓ content",
    )
    assert m.metadata == {"nested": {"x": [1, "ü"]}}
    assert m.expires_at == expiry
    assert m.created_at.tzinfo is not None
    assert (m.access_count, m.last_accessed_at, m.needs_reindex) == (0, None, False)
    assert backend.get("does-not-exist") is None


# -- update ----------------------------------------------------------------------------------


def test_update_applies_patch_and_replaces_metadata(backend: SqliteMemoryBackend):
    created = backend.create(_new("old", key="k", metadata={"a": 1, "b": 2}))
    before = backend.get(created.id)
    updated = backend.update(created.id, MemoryPatch(type="episodic", metadata={"c": 3}))
    assert updated.metadata == {"c": 3}
    assert (updated.type, updated.content, updated.key) == ("episodic", "old", "k")
    assert updated.updated_at >= before.updated_at and updated.created_at == before.created_at
    assert backend.get(created.id) == updated
    assert backend.update("missing", MemoryPatch(content="x")) is None


def test_update_to_a_taken_key_is_a_conflict(backend: SqliteMemoryBackend):
    a = backend.create(_new("a", key="first"))
    b = backend.create(_new("b", key="second"))
    with pytest.raises(ConflictError) as err:
        backend.update(b.id, MemoryPatch(key="first", content="changed"))
    assert err.value.reason == "DUPLICATE_KEY"
    assert backend.get(b.id).key == "second" and backend.get(b.id).content == "b"
    # The same key under another owner, or re-setting one's own key, is fine.
    c = backend.create(_new("c", api_key_id="k2", key="third"))
    assert backend.update(c.id, MemoryPatch(key="first")).key == "first"
    assert backend.update(a.id, MemoryPatch(key="first")).key == "first"


# -- list / clear ----------------------------------------------------------------------------


def _seed(backend: SqliteMemoryBackend) -> dict[str, str]:
    rows = {
        "a": _new("User likes Dark Mode", key="pref:dark_mode", session_id="s1"),
        "b": _new("Deploys on Friday", type="episodic", session_id="s2"),
        "c": _new("uses 100% of CPU", type="procedural", session_id="s1"),
        "d": _new("snake_case names", type="semantic", key="style"),
        "e": _new("other tenant dark mode", api_key_id="k2"),
    }
    return {name: backend.create(m).id for name, m in rows.items()}


def _ids(page) -> list[str]:
    return [m.id for m in page.data]


def test_list_filters(backend: SqliteMemoryBackend):
    ids = _seed(backend)
    listed = lambda **kw: set(_ids(backend.list(MemoryFilter(**kw), 100, 0)))  # noqa: E731
    assert listed(api_key_id="k1") == {ids[n] for n in "abcd"}
    assert listed(api_key_id="k1", session_id="s1") == {ids["a"], ids["c"]}
    assert listed(type="episodic") == {ids["b"]}
    assert listed(api_key_id="k1", q="DARK mode") == {ids["a"]}
    assert listed(q="dark_mode") == {ids["a"]}  # matches the key
    assert listed(q="STYLE") == {ids["d"]}
    assert listed(q="100%") == {ids["c"]}
    assert listed(q="%") == {ids["c"]}  # "%" is literal, not a wildcard
    assert listed(q="e_c") == {ids["d"]}  # "_" is literal: "snake_case" only
    assert listed(q="e%c") == set()
    assert listed(q="nothing like this") == set()


def test_q_folds_unicode_case(backend: SqliteMemoryBackend):
    german = backend.create(_new("Ich mag ÄPFEL")).id
    russian = backend.create(_new("Я люблю Чай")).id
    assert _ids(backend.list(MemoryFilter(q="äpfel"), 10, 0)) == [german]
    assert _ids(backend.list(MemoryFilter(q="ЧАЙ"), 10, 0)) == [russian]


def test_list_is_newest_first_with_pagination_and_aggregates(backend: SqliteMemoryBackend):
    contents = ["abcd", "abcde", "x" * 100]
    ids = [backend.create(_new(c, type=t)).id for c, t in zip(contents, ["factual", "factual", "semantic"])]
    page = backend.list(MemoryFilter(api_key_id="k1"), 10, 0)
    assert _ids(page) == ids[::-1]
    assert page.total == 3
    assert page.by_type == {"factual": 2, "episodic": 0, "procedural": 0, "semantic": 1}
    assert page.tokens_used == 1 + 2 + 25

    second = backend.list(MemoryFilter(api_key_id="k1"), 1, 1)
    assert _ids(second) == [ids[1]] and second.total == 3 and second.tokens_used == 28

    filtered = backend.list(MemoryFilter(api_key_id="k1", q="abcd"), 10, 0)
    assert filtered.total == 2 and filtered.tokens_used == 3 and filtered.by_type["semantic"] == 0
    assert backend.list(MemoryFilter(api_key_id="nobody"), 10, 0).tokens_used == 0


def test_list_orders_by_created_at_then_memory_id(backend: SqliteMemoryBackend, db: Database):
    ids = [backend.create(_new(f"m{i}")).id for i in range(3)]
    with db.write() as conn:  # same timestamp: memory_id breaks the tie
        conn.execute("UPDATE memories SET created_at = '2025-01-01T00:00:00.000000Z'")
    assert _ids(backend.list(MemoryFilter(), 10, 0)) == ids[::-1]


def test_created_before_filter(backend: SqliteMemoryBackend, db: Database):
    old = backend.create(_new("old one")).id
    new = backend.create(_new("new one")).id
    with db.write() as conn:
        conn.execute("UPDATE memories SET created_at = ? WHERE id = ?", ("2020-01-01T00:00:00.000000Z", old))
    cutoff = datetime(2021, 1, 1, tzinfo=UTC)
    assert _ids(backend.list(MemoryFilter(created_before=cutoff), 10, 0)) == [old]
    assert backend.clear(MemoryFilter(created_before=cutoff)) == 1
    assert _ids(backend.list(MemoryFilter(), 10, 0)) == [new]


def test_clear_with_filters_counts_and_removes_fts_rows(backend: SqliteMemoryBackend, db: Database):
    ids = _seed(backend)
    assert len(_fts_rowids(db, "dark")) == 2
    assert backend.clear(MemoryFilter(api_key_id="k1", session_id="s1")) == 2
    assert _fts_rowids(db, "dark") == [backend.get(ids["e"]).memory_id]
    assert backend.get(ids["a"]) is None and backend.get(ids["b"]) is not None
    assert backend.clear(MemoryFilter(api_key_id="k1", type="semantic")) == 1
    assert backend.clear(MemoryFilter(api_key_id="k1", type="semantic")) == 0
    assert backend.clear(MemoryFilter(api_key_id="k2")) == 1
    assert _fts_rowids(db, "dark") == []
    with db.read() as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchall() == [(1,)]


# -- concurrency -----------------------------------------------------------------------------


def test_readers_run_in_parallel_with_a_writer(backend: SqliteMemoryBackend):
    """Two writer threads (serialized by the writer lock) and four readers (own connections,
    WAL snapshots): nothing may fail with "database is locked" or a nested-transaction error."""
    errors: list[BaseException] = []
    writers_left = threading.Semaphore(0)
    done = threading.Event()

    def writer(prefix: str) -> None:
        try:
            for i in range(100):
                created = backend.create(_new(f"concurrent memory {i}", key=f"{prefix}{i % 20}"))
                backend.touch([created.id])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            writers_left.release()

    def reader() -> None:
        seen = 0
        try:
            for _ in range(300):
                page = backend.list(MemoryFilter(api_key_id="k1"), 5, 0)
                assert page.total >= seen  # committed rows never disappear
                seen = page.total
                for m in page.data:
                    backend.get(m.id)
                if done.is_set():
                    break
        except BaseException as exc:
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(p,)) for p in ("a", "b")]
    threads = writers + [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for _ in writers:
        writers_left.acquire(timeout=60)
    done.set()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert backend.list(MemoryFilter(), 1, 0).total == 40  # 2 writers x 20 keys, upserted


# -- timestamps ------------------------------------------------------------------------------


def test_iso_is_fixed_width_utc():
    assert iso(datetime(2024, 3, 4, 5, 6, 7, tzinfo=UTC)) == "2024-03-04T05:06:07.000000Z"
    plus_two = timezone(timedelta(hours=2))
    assert iso(datetime(2024, 3, 4, 5, 6, 7, 8, tzinfo=plus_two)) == "2024-03-04T03:06:07.000008Z"
    assert iso(datetime(999, 1, 1)) == "0999-01-01T00:00:00.000000Z"
    assert iso(None) is None and parse_iso(None) is None
    with pytest.raises(ValueError):
        parse_iso("2024-03-04 05:06:07")


_aware = st.datetimes(
    min_value=datetime(1, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7)), timezone(timedelta(hours=9))]),
)


@given(_aware, _aware)
def test_iso_round_trips_and_text_order_is_time_order(a: datetime, b: datetime):
    assert parse_iso(iso(a)) == a
    assert (iso(a) < iso(b)) == (a < b)


def test_cjk_index_migration_backfills_rows_written_before_it(tmp_path: Path):
    """A database at version 1 with Chinese rows gains a trigram index that finds them."""
    version, name, sql = available_migrations()[0]
    database = Database(tmp_path / "v1.db")
    try:
        with database.write() as conn:
            conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)")
            conn.execute(sql)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?, '2026-01-01')", (version, name))
            # Rows as version 1 wrote them (the current backend writes columns later migrations add).
            for memory_id, content in ((1, "我喜欢深色模式"), (2, "plain english only")):
                conn.execute(
                    "INSERT INTO memories (id, memory_id, api_key_id, type, content, created_at, updated_at) "
                    "VALUES (?, ?, 'k', 'factual', ?, '2026-01-01T00:00:00.000000Z', "
                    "'2026-01-01T00:00:00.000000Z')",
                    (f"id-{memory_id}", memory_id, content),
                )
        assert apply_migrations(database) == [v for v, _, _ in available_migrations()][1:]
        with database.read() as conn:
            rows = conn.execute("SELECT rowid FROM memory_fts_cjk WHERE memory_fts_cjk MATCH '\"深色模\"'").fetchall()
            indexed = conn.execute("SELECT count(*) FROM memory_fts_cjk_docsize").fetchone()[0]
        assert rows == [(1,)] and indexed == 1
    finally:
        database.close()


def test_occurred_at_migration_leaves_old_rows_unknown_and_indexes_effective_time(tmp_path: Path):
    """A database at version 8 gains occurred_at (NULL on the rows already there: not known)
    and the two indexes on the effective time, which a day range of one owner and the
    neighbouring turns of one session use."""
    database = Database(tmp_path / "v8.db")
    try:
        with database.write() as conn:
            conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at TEXT)")
            for version, name, sql in available_migrations()[:8]:
                conn.execute(sql)
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?, '2026-01-01')", (version, name))
            conn.execute(
                "INSERT INTO memories (id, memory_id, api_key_id, session_id, type, content, created_at, "
                "updated_at) VALUES ('old', 1, 'k', 's', 'factual', 'before 0009', "
                "'2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z')"
            )
        assert apply_migrations(database)[0] == 9
        with database.read() as conn:
            assert conn.execute("SELECT occurred_at FROM memories WHERE id = 'old'").fetchall() == [(None,)]
            day = conn.execute(
                "EXPLAIN QUERY PLAN SELECT memory_id FROM memories WHERE api_key_id = ? AND "
                "coalesce(occurred_at, created_at) >= ? AND coalesce(occurred_at, created_at) < ?",
                ("k", "2026-01-01", "2026-01-02"),
            ).fetchall()
            turns = conn.execute(
                "EXPLAIN QUERY PLAN SELECT memory_id FROM memories WHERE api_key_id = ? AND session_id = ? AND "
                "coalesce(occurred_at, created_at) < ? ORDER BY coalesce(occurred_at, created_at) DESC, "
                "memory_id DESC LIMIT 2",
                ("k", "s", "2026-01-02"),
            ).fetchall()
        assert "idx_memories_owner_happened" in str(day)
        assert "idx_memories_owner_session_happened" in str(turns) and "TEMP B-TREE" not in str(turns)
    finally:
        database.close()


def test_occurred_at_is_stored_kept_or_replaced_by_upserts_and_patched(backend: SqliteMemoryBackend):
    said = datetime(2023, 12, 31, 18, 45, 1, 250000, tzinfo=UTC)
    later = datetime(2024, 1, 2, 9, 0, tzinfo=UTC)
    first = backend.create(_new("User adopted a cat", key="pet", occurred_at=said))
    assert backend.get(first.id).occurred_at == said and backend.get(first.id).happened_at == said
    assert backend.create(_new("User adopted a cat named Miso", key="pet")).memory.occurred_at == said
    assert backend.create(_new("User adopted two cats", key="pet", occurred_at=later)).memory.occurred_at == later
    [batch] = backend.create_each([_new("User moved to Lisbon", occurred_at=said)])
    assert backend.get(batch.id).occurred_at == said
    assert backend.update(first.id, MemoryPatch(content="User has two cats")).occurred_at == later
    assert backend.update(first.id, MemoryPatch(occurred_at=said)).occurred_at == said
    plain = backend.get(backend.create(_new("no time given")).id)
    assert plain.occurred_at is None and plain.happened_at == plain.created_at
