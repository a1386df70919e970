"""PgDatabase's bounds on a real PostgreSQL: every connection carries a server-side statement
timeout, an idle-in-transaction timeout and TCP keepalives; what the server ends at those
bounds, a transaction an earlier failure left aborted and a server shutting down or starting
up are all UNAVAILABLE (never INTERNAL), and the same object serves again afterwards;
migrations are exempt from the statement timeout; while the server is away a request does
not wait the whole pool timeout at each of its reads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import grpc
import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout
from support.postgres import PostgresServer

from memsvc.api.errors import status_for
from memsvc.kernel.errors import UnavailableError
from memsvc.storage.postgres.database import PgDatabase, as_domain_error
from memsvc.storage.postgres.migrations import apply_migrations, current_version, latest_version

_MIGRATION_LOCK = 0x6D656D7376636D67  # the advisory lock key the migrations take


@pytest.fixture
def open_db(postgres_db_url: str) -> Iterator[Callable[..., PgDatabase]]:
    """`open_db(**options)`: a PgDatabase on the test's database (closed afterwards)."""
    opened: list[PgDatabase] = []

    def open_(**options) -> PgDatabase:
        opened.append(PgDatabase(postgres_db_url, **options))
        return opened[-1]

    yield open_
    for db in opened:
        db.close()


def _until(what: str, condition: Callable[[], bool], bound_s: float = 30.0) -> None:
    deadline = time.monotonic() + bound_s
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {bound_s} s"
        time.sleep(0.02)


def test_every_connection_carries_the_server_side_bounds_and_tcp_keepalives(open_db):
    db = open_db()
    with db.read() as conn:
        assert conn.execute("SHOW statement_timeout").fetchone()[0] == "15s"
        assert conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0] == "1min"
        params = conn.info.get_parameters()
    assert params["keepalives"] == "1" and params["keepalives_idle"] == "10"
    assert params["keepalives_interval"] == "3" and params["keepalives_count"] == "3"
    assert params["tcp_user_timeout"] == "15000" and params["connect_timeout"] == "2"
    assert db.timeout_s < 5  # the wait for a connection ends before a usual 5 s client deadline


def test_a_statement_past_the_statement_timeout_is_unavailable_and_the_database_serves_again(open_db):
    db = open_db(statement_timeout_s=0.2)
    with pytest.raises(UnavailableError, match="statement timeout") as caught:
        with db.read() as conn:
            conn.execute("SELECT pg_sleep(30)")
    assert status_for(caught.value).code == grpc.StatusCode.UNAVAILABLE
    with db.read() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_statement_after_a_failed_one_in_the_same_read_is_unavailable_not_internal(open_db):
    """A caller that went on after a failed statement (a fallback): PostgreSQL refuses every
    later statement of the transaction."""
    db = open_db()
    with pytest.raises(UnavailableError, match="earlier database statement") as caught:
        with db.read() as conn:
            with pytest.raises(psycopg.Error):
                conn.execute("SELECT 1 / 0")
            conn.execute("SELECT 1")
    assert status_for(caught.value).code == grpc.StatusCode.UNAVAILABLE
    with db.read() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_transaction_left_idle_past_the_bound_is_ended_by_the_server_and_the_pool_recovers(open_db, postgres_db_url):
    db = open_db(idle_in_transaction_timeout_s=0.3)
    with pytest.raises(UnavailableError) as caught, psycopg.connect(postgres_db_url, autocommit=True) as watch:
        with db.read() as conn:
            backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            _until(
                "end of the idle session",
                lambda: (
                    watch.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (backend,)).fetchone()[0] == 0
                ),
            )
            conn.execute("SELECT 1")
    assert status_for(caught.value).code == grpc.StatusCode.UNAVAILABLE
    with db.read() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_migrations_wait_for_another_replicas_lock_past_the_statement_timeout(open_db, postgres_db_url):
    db = open_db(statement_timeout_s=0.3)
    failures: list[BaseException] = []

    def migrate() -> None:
        try:
            apply_migrations(db)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    runner = threading.Thread(target=migrate)
    with psycopg.connect(postgres_db_url) as holder, psycopg.connect(postgres_db_url, autocommit=True) as watch:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        runner.start()
        # Waited on the lock for more than three statement timeouts, or already failed.
        _until(
            "a long wait on the migration lock",
            lambda: (
                not runner.is_alive()
                or watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'memsvc' AND wait_event_type = 'Lock'"
                    " AND now() - query_start > interval '1 second'"
                ).fetchone()[0]
                == 1
            ),
        )
        assert failures == []
        holder.commit()
    runner.join(60)
    assert failures == [] and current_version(db) == latest_version()


@pytest.mark.parametrize(
    "error",
    [
        pg_errors.AdminShutdown("terminating connection due to administrator command"),
        pg_errors.CrashShutdown("terminating connection because of crash of another server process"),
        pg_errors.CannotConnectNow("the database system is starting up"),
        pg_errors.QueryCanceled("canceling statement due to statement timeout"),
        pg_errors.IdleInTransactionSessionTimeout("terminating connection due to idle-in-transaction timeout"),
        pg_errors.InFailedSqlTransaction("current transaction is aborted"),
        PoolTimeout("no connection to the database within 2.5 s"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_a_server_away_or_slow_is_unavailable_with_what_happened(error):
    mapped = as_domain_error(error)
    assert isinstance(mapped, UnavailableError) and str(error) in mapped.message
    assert status_for(mapped).code == grpc.StatusCode.UNAVAILABLE


def test_while_the_server_is_away_a_request_does_not_wait_the_pool_timeout_again(own_server: PostgresServer):
    db = PgDatabase(own_server.url, timeout_s=2)
    try:
        with db.read() as conn:
            conn.execute("SELECT 1")
        own_server.stop()
        try:
            with pytest.raises(UnavailableError, match="within 2 s"):
                with db.read() as conn:
                    conn.execute("SELECT 1")
            assert db.away
            with pytest.raises(UnavailableError, match="within 0.25 s"):
                with db.read() as conn:
                    conn.execute("SELECT 1")
        finally:
            own_server.start()
        _until("service after the start", lambda: _serves(db), bound_s=60)
        assert not db.away
    finally:
        db.close()


def _serves(db: PgDatabase) -> bool:
    try:
        with db.read() as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except UnavailableError:
        return False
