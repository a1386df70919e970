"""The transaction contract both databases keep, written once: `Database` (SQLite) and
`PgDatabase` (PostgreSQL) supply only their connections and what truly differs.

- `read()` is one snapshot for the whole block; a read() nested in a read() of the same thread
  joins it (one transaction, counted once in `read_transactions`).
- `write()` is applied entirely or not at all: COMMIT when the block ends, ROLLBACK when it
  raises, and then the hooks given to `on_rollback()` run; `commits` counts what committed.
- A write() nested in a write() of the same thread joins it as a savepoint: if the inner block
  raises, its statements are undone and the outer one may go on; what it wrote commits with
  the outer transaction. A write() nested in a read() is a transaction of its own beside it,
  committed at its end and seen by the read after `renew_read()`.
- A driver's error leaves as the core's error when it has one (`domain_error`), chained.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, ClassVar

from memsvc.kernel.errors import StorageFullError


@dataclass
class _Held:
    """A transaction this thread is inside."""

    conn: Any
    writes: bool
    savepoints: int = 0
    rollback_hooks: list[Callable[[], None]] = field(default_factory=list)
    #: What a read transaction has read once and may reuse (see snapshot_memo).
    memo: dict[Any, Any] = field(default_factory=dict)


class _Thread(threading.local):
    """A thread's transactions: at most one read and one write (nested blocks join them)."""

    read: _Held | None = None
    write: _Held | None = None


class Transactions(ABC):
    """read(), write(), savepoint() and their bookkeeping over a database's connections."""

    #: The driver's base exception class.
    driver_error: ClassVar[type[Exception]]
    #: The statements that begin a read and a write transaction.
    begin_read: ClassVar[str]
    begin_write: ClassVar[str]
    #: Whether a read() nested in a write() joins it and sees its rows (PostgreSQL), rather
    #: than reading its own snapshot beside it (SQLite's per-thread readers).
    reads_join_writes: ClassVar[bool]

    def __init__(self) -> None:
        #: Write transactions committed through this object.
        self.commits = 0
        #: Outermost read transactions begun: a request that reads under one snapshot adds 1.
        self.read_transactions = 0
        self._closed = False
        self._counts_lock = threading.Lock()
        self._thread = _Thread()

    @abstractmethod
    def _connection(self, writes: bool) -> AbstractContextManager[Any]:
        """The connection a new transaction runs on, held for as long as it runs."""

    @abstractmethod
    def _in_transaction(self, conn: Any) -> bool:
        """Whether `conn` still has a transaction to roll back (the database may have ended
        it itself, or the connection may be lost)."""

    @abstractmethod
    def domain_error(self, exc: Exception) -> Exception:
        """The driver's error as the core's error (unchanged when it has none)."""

    @abstractmethod
    def close(self) -> None:
        """Close every connection. Idempotent; call it once traffic has stopped."""

    def _out_of_room(self, conn: Any) -> bool:
        """Whether a failed write that the database ended itself is best explained by a lack
        of space (then it is reported as StorageFullError)."""
        return False

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the database is closed")

    @contextmanager
    def _mapped_errors(self) -> Iterator[None]:
        try:
            yield
        except self.driver_error as exc:
            mapped = self.domain_error(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    # -- transactions --------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[Any]:
        """A connection inside a read transaction: one snapshot for the whole block."""
        thread = self._thread
        joined = thread.write if self.reads_join_writes and thread.write is not None else thread.read
        if joined is not None:
            yield joined.conn
            return
        with self._transaction(writes=False) as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[Any]:
        """A connection inside a write transaction, committed when the block ends and rolled
        back when it raises; nested in this thread's write(), a savepoint of it."""
        held = self._thread.write
        if held is not None:
            with self.savepoint(held.conn) as conn:
                yield conn
            return
        with self._transaction(writes=True) as conn:
            yield conn

    @contextmanager
    def _transaction(self, writes: bool) -> Iterator[Any]:
        self._check_open()
        with self._mapped_errors(), self._connection(writes) as conn:
            conn.execute(self.begin_write if writes else self.begin_read)
            held = _Held(conn, writes)
            if writes:
                self._thread.write = held
            else:
                self._thread.read = held
                with self._counts_lock:
                    self.read_transactions += 1
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                ended = writes and isinstance(exc, self.driver_error) and not self._in_transaction(conn)
                full = ended and self._out_of_room(conn)
                self._abandon(held)
                if full:
                    raise StorageFullError.no_space() from exc
                raise
            finally:
                if writes:
                    self._thread.write = None
                else:
                    self._thread.read = None
            if writes:
                with self._counts_lock:
                    self.commits += 1

    def _abandon(self, held: _Held) -> None:
        """Roll back and tell the rollback hooks. A ROLLBACK that fails (the connection is
        lost) is not raised over the error that ended the block; neither is a hook's error."""
        with suppress(self.driver_error):
            if self._in_transaction(held.conn):
                held.conn.execute("ROLLBACK")
        for hook in held.rollback_hooks:
            with suppress(Exception):
                hook()

    @contextmanager
    def savepoint(self, conn: Any) -> Iterator[Any]:
        """Inside this thread's write() on `conn`: a nested transaction. If the block raises,
        its statements are undone and the exception propagates, while the outer transaction
        stays open (so one failing part of a batch does not take the others down)."""
        held = self._thread.write
        if held is None or held.conn is not conn:
            raise RuntimeError("savepoint() is only valid inside this thread's write()")
        held.savepoints += 1
        name = f"memsvc_sp{held.savepoints}"
        try:
            with self._mapped_errors():
                conn.execute(f"SAVEPOINT {name}")
                try:
                    yield conn
                except BaseException:
                    self._undo_savepoint(conn, name)
                    raise
                conn.execute(f"RELEASE SAVEPOINT {name}")
        finally:
            held.savepoints -= 1

    def _undo_savepoint(self, conn: Any, name: str) -> None:
        # A full disk (or an I/O error) can make SQLite roll the whole transaction back
        # itself, and a lost connection has none left: then there is no savepoint to return
        # to, and the error to report is the one that did it, not "no such savepoint".
        if not self._in_transaction(conn):
            return
        try:
            conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
            conn.execute(f"RELEASE SAVEPOINT {name}")
        except self.driver_error:  # the part cannot be undone alone: undo everything
            conn.execute("ROLLBACK")

    def renew_read(self) -> None:
        """Inside a read() block: move this thread's snapshot forward to now, so what this
        thread just wrote in a write() of its own is visible to the rest of the block (the
        lazy vector backfill before a search does). Elsewhere it does nothing."""
        held = self._thread.read
        if held is None:
            return
        held.memo.clear()  # a new snapshot: nothing read in the old one holds
        with self._mapped_errors():
            held.conn.execute("COMMIT")
            held.conn.execute(self.begin_read)

    def snapshot_memo(self, conn: Any) -> dict[Any, Any] | None:
        """Inside a read() block on `conn`: a dict that lives exactly as long as its snapshot,
        for values a request would otherwise read more than once (the owner's change number
        that both the working set and the vector block check; the vector state). A value read
        in one snapshot cannot change within it, so reusing it is exact. None elsewhere (a
        PostgreSQL write transaction, READ COMMITTED, sees each commit as it happens)."""
        held = self._thread.read
        return held.memo if held is not None and held.conn is conn else None

    def on_rollback(self, hook: Callable[[], None]) -> None:
        """Inside a write() block: call `hook()` if this transaction does not commit (so an
        in-process cache updated inside the transaction can drop what it learned)."""
        held = self._thread.write
        if held is None:
            raise RuntimeError("on_rollback() is only valid inside write()")
        held.rollback_hooks.append(hook)
