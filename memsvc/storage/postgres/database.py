"""PostgreSQL connections for memsvc over psycopg 3: a pool shared by every thread (the
transactions over it: `memsvc.storage.transactions`).

Why this shape: many memsvc processes on many hosts share one PostgreSQL, so nothing here
may assume it is the only writer. Writes are not funnelled through one connection (the
server orders concurrent writers itself); each `write()` is a READ COMMITTED transaction on a
pooled connection, so a rule that must hold across processes is written as one statement
(an upsert with a WHERE, a row lock) rather than a read followed by a write. Each `read()` is
a REPEATABLE READ, READ ONLY transaction: every statement of the block sees one snapshot (a
page and its counts over the same rows), as SQLite's read transaction does.

Failures are the core's errors, never psycopg's: a refused or lost connection, a server
shutting down, restarting or still starting up, a statement the server cancelled at its
statement timeout, a transaction an earlier failed statement left aborted, or a pool that
has no connection to give within `timeout_s` is UnavailableError (the same request succeeds
once the server is back, with no restart of memsvc: a connection the server ended is
replaced before it is lent); a unique violation is ConflictError; a full disk is
StorageFullError.

Nothing waits without a bound: a connection attempt gives up after `connect_timeout`, a
host that vanished (no FIN, no RST) is noticed by TCP keepalives and the unacknowledged-data
timeout, a statement the server runs too long is cancelled by the server, and a session that
sits idle inside a transaction is ended by the server. These bounds are per statement, below
the deadlines clients usually give a call (a few seconds); the gRPC deadline itself is not
passed down to this layer (a call past its deadline is already answered DEADLINE_EXCEEDED by
the client's own gRPC stack). A server that is frozen rather than gone (its kernel still
acknowledges every packet) is not detectable at the TCP level: the client's deadline answers
the call, and the statement resumes when the server does.
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from memsvc.kernel.errors import ConflictError, StorageFullError, UnavailableError
from memsvc.kernel.inline import may_block
from memsvc.storage.database import scalar
from memsvc.storage.transactions import Transactions

#: The change counter of `memories` (migrations/postgres/0001_initial.sql).
_DATA_VERSION = "SELECT version FROM memory_changes WHERE id = 1"
#: How long the pool retries a lost connection in the background, its delays doubling from
#: one second, before it gives up until a request asks again (then it connects at once). A
#: bound keeps an outage of minutes from leaving the retries a minute apart after the server
#: is back, when every request would still be UNAVAILABLE.
_RECONNECT_S = 10.0
#: How long a request waits for a pooled connection (or for a new one) before it is
#: UNAVAILABLE: below the 5-10 s deadlines clients typically set, so the client gets the
#: retryable status instead of its own DEADLINE_EXCEEDED while the server is away.
_POOL_TIMEOUT_S = 2.5
#: The server cancels a statement after this long (QueryCanceled, answered UNAVAILABLE). Every
#: statement of a request is an indexed read or a batch-sized write of milliseconds; one that
#: runs for seconds is waiting on a lock held by a stuck transaction or an overloaded server,
#: and freeing its connection keeps the pool from draining behind it. Migrations, which may
#: build an index over every row, lift it for their own transaction.
STATEMENT_TIMEOUT_S = 15.0
#: The server ends a session that stays idle inside an open transaction this long (a memsvc
#: process that froze or lost its thread mid-transaction), so its locks and its snapshot do
#: not hold back other replicas' writes and vacuum. Generous: a request may call an embedding
#: service (bounded by its own timeout) inside a read transaction.
IDLE_IN_TRANSACTION_TIMEOUT_S = 60.0
#: While the server is known to be away (the last wait for a connection timed out with the
#: pool short of connections, so it could not open one), a request waits only this long for
#: one: a request that reads several times (the credentials, then its data) would otherwise
#: wait the whole pool timeout at each read and pass its deadline. A connection lent clears it.
_AWAY_WAIT_S = 0.25
#: TCP keepalives on every connection: after 10 s of silence a probe every 3 s, and the
#: connection is dead after 3 unanswered probes; data the server host does not acknowledge for
#: 15 s ends it too (tcp_user_timeout). A host that vanished without closing its sockets (a
#: network partition, a crashed VM) would otherwise keep a request waiting for ever.
_KEEPALIVES = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 3,
    "keepalives_count": 3,
    "tcp_user_timeout": 15_000,
}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


#: Server-side conditions that say "the database is away or too slow right now", each with
#: what the client is told: the same request succeeds once it passes.
_TRANSIENT: tuple[tuple[type[BaseException], str], ...] = (
    (PoolTimeout, "no database connection was free in time"),
    (pg_errors.QueryCanceled, "a database statement ran past the statement timeout"),
    (pg_errors.AdminShutdown, "the database server is shutting down"),
    (pg_errors.CrashShutdown, "the database server is recovering from a crash"),
    (pg_errors.CannotConnectNow, "the database server is starting up"),
    (pg_errors.IdleInTransactionSessionTimeout, "the database ended an idle transaction"),
    # An earlier statement of the same transaction failed and its caller went on (a vector
    # search that fell back to keywords after a statement timeout): the transaction can only
    # be retried, which the client does on UNAVAILABLE.
    (pg_errors.InFailedSqlTransaction, "an earlier database statement of this request failed"),
)


def as_domain_error(exc: Exception) -> Exception:
    """psycopg's errors as the core's: what a caller (and the API's status mapping) can act
    on. A transaction the server aborted to resolve a conflict with another one (a deadlock,
    a serialization failure) is a ConflictError, retried by the client like any conflict; an
    error of no known kind (a bug in a statement) is returned unchanged."""
    for cls, what in _TRANSIENT:
        if isinstance(exc, cls):
            return UnavailableError(f"the database is unavailable: {what} ({_first_line(exc)}); retry")
    if isinstance(exc, pg_errors.UniqueViolation):
        constraint = exc.diag.constraint_name or "a unique constraint"
        return ConflictError(f"the write conflicts with a stored row ({constraint})")
    if isinstance(exc, pg_errors.TransactionRollback):
        return ConflictError(f"the transaction was aborted by a concurrent one ({_first_line(exc)}); retry")
    if isinstance(exc, pg_errors.DiskFull):
        return StorageFullError.no_space()
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return UnavailableError(f"the database is unavailable ({_first_line(exc)}); retry once it is back")
    return exc


def _usable(conn: psycopg.Connection) -> bool:
    """Whether an idle connection from the pool still works (after a server restart every
    idle connection is dead).

    An idle connection receives nothing unless the server ended it (a restart, a terminated
    backend): then its socket is readable, and only then is an empty query sent to tell. A
    round trip before every lending would cost as much as the statement it precedes (0.3-0.4
    ms of a 1 ms read on a busy two-core machine)."""
    if conn.closed:
        return False
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
    if not poller.poll(0):
        return True
    try:
        conn.execute("")
    except psycopg.Error:
        return False  # and the connection is marked broken: the pool will not lend it again
    return True


class PgDatabase(Transactions):
    """A pool of `min_size`..`max_size` connections to `url` (postgresql://…).

    `timeout_s`: how long a request waits for a free connection (or for the server to take
    a new one) before it fails with UnavailableError instead of hanging.
    `statement_timeout_s`, `idle_in_transaction_timeout_s`: the server-side bounds set on
    every connection (see the module constants for why these values).
    """

    driver_error = psycopg.Error
    begin_read = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
    begin_write = "BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE"
    reads_join_writes = True

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout_s: float = _POOL_TIMEOUT_S,
        statement_timeout_s: float = STATEMENT_TIMEOUT_S,
        idle_in_transaction_timeout_s: float = IDLE_IN_TRANSACTION_TIMEOUT_S,
    ) -> None:
        if min_size < 0 or max_size < max(1, min_size):
            raise ValueError("need 0 <= min_size <= max_size and max_size >= 1")
        if min(timeout_s, statement_timeout_s, idle_in_transaction_timeout_s) <= 0:
            raise ValueError("timeout_s, statement_timeout_s and idle_in_transaction_timeout_s must be > 0")
        super().__init__()
        self.url = url
        self.timeout_s = float(timeout_s)
        self._server_options = (
            f"-c statement_timeout={round(statement_timeout_s * 1000)} "
            f"-c idle_in_transaction_session_timeout={round(idle_in_transaction_timeout_s * 1000)}"
        )
        #: The server is away: a wait for a connection timed out and the pool could not open
        #: one (see _AWAY_WAIT_S).
        self.away = False
        self._watch: psycopg.Connection | None = None  # see data_version
        self._watch_lock = threading.Lock()
        self._pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=self.timeout_s,
            open=False,
            name="memsvc",
            reconnect_timeout=_RECONNECT_S,
            kwargs=self._connect_kwargs(),
        )
        # Not waiting: a server that is down at start makes requests UNAVAILABLE, not startup hang.
        self._pool.open(wait=False)

    def _connect_kwargs(self) -> dict[str, Any]:
        # libpq counts connect_timeout in whole seconds and takes at least 2.
        return {
            "autocommit": True,
            "connect_timeout": max(2, round(self.timeout_s)),
            "application_name": "memsvc",
            "options": self._server_options,
            **_KEEPALIVES,
        }

    def _in_transaction(self, conn: psycopg.Connection) -> bool:
        return conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR)

    domain_error = staticmethod(as_domain_error)

    @contextmanager
    def _connection(self, writes: bool) -> Iterator[psycopg.Connection]:
        """A working connection from the pool, returned to it afterwards. A dead one is
        handed back (the pool replaces it) and the pool's other idle connections are checked
        at once: when the server restarted they are all dead, and the pool's own check on
        lending waits a growing back-off after each one (about a second for the first),
        which would turn a restart into UNAVAILABLE answers after the server is back."""
        if not writes:
            may_block("a PostgreSQL read")
        wait = _AWAY_WAIT_S if self.away else self.timeout_s
        deadline = time.monotonic() + wait
        while True:
            try:
                conn = self._pool.getconn(timeout=max(deadline - time.monotonic(), 0.001))
            except PoolTimeout:
                stats = self._pool.get_stats()
                self.away = stats["pool_size"] < stats["pool_max"]  # not merely every connection busy
                raise PoolTimeout(f"no connection to the database within {wait:g} s") from None
            if _usable(conn):
                break
            self._pool.putconn(conn)
            self._pool.check()
        self.away = False
        try:
            yield conn
        finally:
            self._pool.putconn(conn)

    # -- change counter --------------------------------------------------------------------

    def data_version(self) -> int:
        """The change counter of `memories`: a number that changes once any process has
        committed a change to them (a statement-level trigger bumps a one-row counter in the
        writing transaction, so a rolled-back change leaves it alone and a reader never sees
        the new number before the rows). One indexed read on a connection of its own that
        never holds a transaction, so it sees each commit as soon as it is made; a
        per-process cache asks it to know when another replica changed the rows."""
        with self._watch_lock, self._mapped_errors():
            self._check_open()
            try:
                return self._read_version()
            except psycopg.OperationalError:
                self._drop_watch()  # lost (the server restarted): one fresh connection
            try:
                return self._read_version()
            except psycopg.Error:
                self._drop_watch()
                raise

    def _read_version(self) -> int:
        if self._watch is None or self._watch.closed:
            self._watch = psycopg.connect(self.url, **self._connect_kwargs())
        return int(scalar(self._watch, _DATA_VERSION))

    def _drop_watch(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._watch_lock:
            self._drop_watch()
        self._pool.close()
