"""PgDatabase and the PostgreSQL migrations on a real server: the transaction contract the
stores rely on (nesting, rollback, one snapshot per read), the change counter other
replicas' caches follow, the core's errors instead of psycopg's (a server that is down is
UNAVAILABLE, and the same object works again once it is back), and migrations applied once
when several replicas start together. A second PgDatabase on the same database stands for
another memsvc process."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import grpc
import psycopg
import pytest
from support.postgres import PostgresServer

from memsvc.api.errors import status_for
from memsvc.kernel.errors import ConflictError, StorageVersionError, UnavailableError
from memsvc.storage.database import Database
from memsvc.storage.postgres.database import PgDatabase
from memsvc.storage.postgres.migrations import apply_migrations, available_migrations, current_version, latest_version


@pytest.fixture
def db(pg_database: PgDatabase) -> PgDatabase:
    return pg_database


@pytest.fixture
def open_db(postgres_db_url: str) -> Iterator[Callable[..., PgDatabase]]:
    """`open_db(**options)`: another PgDatabase on the test's database (closed afterwards)."""
    opened: list[PgDatabase] = []

    def open_(**options) -> PgDatabase:
        opened.append(PgDatabase(postgres_db_url, **options))
        return opened[-1]

    yield open_
    for other in opened:
        other.close()


@pytest.fixture
def other(db: PgDatabase, open_db) -> PgDatabase:
    return open_db()


def _insert(
    conn: psycopg.Connection,
    memory_id: str,
    owner: str = "alice",
    key: str | None = None,
    content: str = "some content",
) -> None:
    conn.execute(
        "INSERT INTO memories (id, api_key_id, type, key, content, created_at, updated_at) "
        "VALUES (%s, %s, 'factual', %s, %s, now(), now())",
        (memory_id, owner, key, content),
    )


def _ids(db: PgDatabase) -> set[str]:
    with db.read() as conn:
        return {r[0] for r in conn.execute("SELECT id FROM memories").fetchall()}


# ---- transactions ----------------------------------------------------------------------


def test_a_read_nested_in_a_write_joins_it_and_sees_its_rows(db, other):
    with db.write() as conn:
        _insert(conn, "m1")
        with db.read() as inner:
            assert inner is conn
            assert inner.execute("SELECT count(*) FROM memories").fetchone()[0] == 1
        assert _ids(other) == set()  # not committed yet
    assert _ids(other) == {"m1"}


def test_nested_reads_share_one_snapshot_and_one_transaction(db, other):
    before = db.read_transactions
    with db.read() as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
        with other.write() as w:
            _insert(w, "m1")
        with db.read() as inner:
            assert inner is conn
            assert inner.execute("SELECT count(*) FROM memories").fetchone()[0] == 0  # same snapshot
    assert db.read_transactions == before + 1
    assert _ids(db) == {"m1"}


def test_a_read_may_not_write(db):
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        with db.read() as conn:
            _insert(conn, "m1")
    assert _ids(db) == set()


def test_a_write_that_raises_is_rolled_back_and_its_error_propagates(db, other):
    calls: list[str] = []
    with pytest.raises(ValueError, match="boom"):
        with db.write() as conn:
            _insert(conn, "m1")
            db.on_rollback(lambda: calls.append("rolled back"))
            raise ValueError("boom")
    assert calls == ["rolled back"]
    assert _ids(other) == set()
    commits = db.commits
    with db.write() as conn:
        _insert(conn, "m2")
        db.on_rollback(lambda: calls.append("committed?"))
    assert calls == ["rolled back"] and db.commits == commits + 1
    assert _ids(other) == {"m2"}


def test_a_write_nested_in_a_write_is_a_savepoint_undone_alone(db, other):
    with db.write() as conn:
        _insert(conn, "outer")
        with pytest.raises(ValueError):
            with db.write() as inner:
                assert inner is conn
                _insert(inner, "inner")
                raise ValueError("undo the inner part only")
        with db.write() as inner:
            _insert(inner, "kept")
    assert _ids(other) == {"outer", "kept"}


def test_a_write_nested_in_a_read_commits_alone_and_renew_read_shows_it(db, other):
    with db.read() as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0  # the snapshot is taken
        with db.write() as w:
            assert w is not conn
            _insert(w, "m1")
        assert _ids(other) == {"m1"}  # committed when its block ended
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0  # the read's snapshot
        db.renew_read()
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 1


def test_a_unique_violation_is_a_conflict_and_rolls_the_block_back(db, other):
    with db.write() as conn:
        _insert(conn, "m1", key="pref:editor")
    with pytest.raises(ConflictError) as caught:
        with db.write() as conn:
            _insert(conn, "m2")
            _insert(conn, "m3", key="pref:editor")  # the owner already has this key
    assert "idx_memories_owner_key" in caught.value.message
    assert status_for(caught.value).code == grpc.StatusCode.ABORTED
    assert _ids(other) == {"m1"}


# ---- the change counter ----------------------------------------------------------------


def test_data_version_moves_when_another_handle_commits_a_change_to_memories(db, other):
    start = db.data_version()
    with other.write() as conn:
        _insert(conn, "m1")
        assert db.data_version() == start  # not committed yet
    after_insert = db.data_version()
    assert after_insert != start
    with other.write() as conn:
        conn.execute("UPDATE memories SET access_count = access_count + 1")
    after_update = db.data_version()
    assert after_update != after_insert
    with other.write() as conn:
        conn.execute("DELETE FROM memories")
    assert db.data_version() != after_update


def test_data_version_stays_after_a_rollback_and_after_writes_elsewhere(db, other):
    start = db.data_version()
    with pytest.raises(RuntimeError):
        with other.write() as conn:
            _insert(conn, "m1")
            raise RuntimeError("roll back")
    assert db.data_version() == start
    with other.write() as conn:
        conn.execute("INSERT INTO sequences (name, value) VALUES ('x', 1)")
    assert db.data_version() == start


# ---- a lost server ---------------------------------------------------------------------


def test_a_connection_the_server_ends_is_unavailable_and_the_next_read_works(db, other):
    with pytest.raises(UnavailableError) as caught:
        with db.read() as conn:
            pid = conn.info.backend_pid
            with other.write() as killer:
                assert killer.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]
            conn.execute("SELECT 1")
    assert status_for(caught.value).code == grpc.StatusCode.UNAVAILABLE
    assert _ids(db) == set()


@pytest.fixture
def own_db(own_server: PostgresServer) -> Iterator[PgDatabase]:
    name = f"test_{uuid.uuid4().hex[:12]}"
    db = PgDatabase(own_server.create_database(name), min_size=3, timeout_s=1)
    apply_migrations(db)
    yield db
    db.close()
    if own_server.proc.poll() is not None:  # a test that stopped it failed before starting it
        own_server.start()
    own_server.drop_database(name)


def _hold_connections(db: PgDatabase, count: int) -> None:
    """Make the pool open `count` connections (reads held at once on as many threads)."""
    barrier = threading.Barrier(count, timeout=60)  # a bound in case one thread fails
    errors: list[BaseException] = []

    def hold() -> None:
        try:
            with db.read() as conn:
                conn.execute("SELECT 1")
                barrier.wait()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=hold) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [e for e in errors if not isinstance(e, threading.BrokenBarrierError)] == []


def test_while_the_server_is_down_every_call_is_unavailable_then_works_again(own_server, own_db):
    _hold_connections(own_db, 3)
    own_db.data_version()
    own_server.stop()
    for call in (lambda: _ids(own_db), own_db.data_version, lambda: _write_one(own_db, "lost")):
        with pytest.raises(UnavailableError) as caught:
            call()
        assert status_for(caught.value).code == grpc.StatusCode.UNAVAILABLE
    own_server.start()
    _until_served(lambda: _write_one(own_db, "m1"))
    assert _ids(own_db) == {"m1"}
    assert own_db.data_version() == 1


def _until_served(call: Callable[[], None], bound_s: float = 60.0) -> None:
    """Call until it succeeds, each failure meanwhile UNAVAILABLE. The pool reconnects in
    the background, its delays doubling from a second while the server was down, so the
    first requests after the start may still find no connection."""
    deadline = time.monotonic() + bound_s
    while True:
        try:
            return call()
        except UnavailableError:
            if time.monotonic() > deadline:
                raise


def test_after_a_restart_the_first_requests_succeed_on_fresh_connections(own_server, own_db):
    _hold_connections(own_db, 3)
    version = own_db.data_version()
    own_server.restart()
    _hold_connections(own_db, 3)  # every idle connection the pool held is dead: each is replaced
    _write_one(own_db, "m1")
    assert own_db.data_version() == version + 1


def _write_one(db: PgDatabase, memory_id: str) -> None:
    with db.write() as conn:
        _insert(conn, memory_id)


# ---- migrations ------------------------------------------------------------------------


def test_replicas_starting_together_apply_each_migration_once(postgres_db_url, open_db):
    replicas = [open_db() for _ in range(4)]
    barrier = threading.Barrier(len(replicas))
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def start(replica: PgDatabase) -> None:
        try:
            barrier.wait()
            results.append(apply_migrations(replica))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(r,)) for r in replicas]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [v for v, _, _ in available_migrations()]
    assert errors == []
    # Each migration once, by whichever replica took the lock first for it: one replica may
    # apply the first ones and another the rest (each migration is its own transaction).
    assert len(results) == len(replicas) and sorted(v for applied in results for v in applied) == every
    assert all(applied == sorted(applied) for applied in results)
    with replicas[0].read() as conn:
        assert [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")] == every


def test_applying_again_changes_nothing(db):
    assert current_version(db) == latest_version() >= 1
    assert apply_migrations(db) == []
    assert current_version(db) == latest_version()


def test_an_empty_database_is_version_zero(postgres_db_url, open_db):
    assert current_version(open_db()) == 0


def test_a_database_newer_than_this_memsvc_is_refused_untouched(postgres_db_url, open_db):
    fresh = open_db()
    newer = latest_version() + 1
    with fresh.write() as conn:
        conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, 'from_the_future')", (newer,))
    with pytest.raises(StorageVersionError) as caught:
        apply_migrations(fresh)
    assert f"database schema version {newer} is newer than this memsvc" in caught.value.message
    assert caught.value.metadata == {"database_version": str(newer), "known_version": str(latest_version())}
    assert status_for(caught.value).code == grpc.StatusCode.FAILED_PRECONDITION
    with fresh.read() as conn:
        assert conn.execute("SELECT to_regclass('memories')").fetchone()[0] is None
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == 1


# ---- the schema ------------------------------------------------------------------------


def test_memories_have_the_sqlite_indexes_and_the_keyword_index(db, sqlite_database: Database):
    with sqlite_database.read() as conn:
        sqlite = {
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'memories' "
                "AND name NOT LIKE 'sqlite_autoindex%'"
            ).fetchall()
        }
    with db.read() as conn:
        pg = {
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'memories' "
                "AND indexname NOT IN ('memories_pkey', 'memories_memory_id_key')"
            ).fetchall()
        }
        search = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'idx_memories_search'").fetchone()[0]
    assert pg == sqlite | {"idx_memories_search"}
    assert "USING gin (search)" in search


def test_memory_ids_come_from_a_sequence_and_are_never_reused(db):
    with db.write() as conn:
        _insert(conn, "m1")
        _insert(conn, "m2")
    with db.write() as conn:
        conn.execute("DELETE FROM memories WHERE id = 'm2'")
    with pytest.raises(RuntimeError):
        with db.write() as conn:
            _insert(conn, "rolled-back")
            raise RuntimeError("roll back")
    with db.write() as conn:
        _insert(conn, "m3")
    with db.read() as conn:
        rows = dict(conn.execute("SELECT id, memory_id FROM memories").fetchall())
    assert rows["m3"] > rows["m1"] + 2  # neither the deleted nor the rolled-back id came back


def test_the_keyword_document_is_english_over_content_and_key(db):
    with db.write() as conn:
        _insert(conn, "m1", key="pref:editor", content="She is running the Dockerized services")
        _insert(conn, "m2", content="Nothing relevant here")
        conn.execute("UPDATE memories SET content = 'now about gardens' WHERE id = 'm2'")
    with db.read() as conn:

        def matching(query: str) -> set[str]:
            return {
                r[0]
                for r in conn.execute(
                    "SELECT id FROM memories WHERE search @@ plainto_tsquery('english', %s)", (query,)
                )
            }

        assert matching("runs") == {"m1"}  # stemmed
        assert matching("editor") == {"m1"}  # from the key
        assert matching("garden") == {"m2"}  # follows an update
        assert matching("relevant") == set()


def test_a_memory_type_outside_the_four_is_refused(db):
    with pytest.raises(psycopg.errors.CheckViolation):
        with db.write() as conn:
            conn.execute(
                "INSERT INTO memories (id, api_key_id, type, content, created_at, updated_at) "
                "VALUES ('m1', 'alice', 'other', 'x', now(), now())"
            )
