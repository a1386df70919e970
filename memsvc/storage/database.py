"""SQLite connections for memsvc over apsw: one writer, parallel per-thread readers.

Why apsw: the stock `sqlite3` module on these machines cannot load extensions, and we need
sqlite-vec as well as FTS5 (which apsw's bundled SQLite has). This module and the rest of
`memsvc.storage` are the only places that import apsw.

Why this shape: SQLite allows one writer at a time per database file. Funnelling every write
through a single connection behind a lock turns contention inside the process into an orderly
queue instead of SQLITE_BUSY retries, and `BEGIN IMMEDIATE` takes the file's write lock up
front, so another process holding it makes us wait (busy timeout) at the start rather than
fail at COMMIT. In WAL mode readers never block the writer nor each other, so each thread
gets its own reader connection and reads run in parallel.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import apsw
import sqlite_vec

from memsvc.kernel.errors import StorageFullError
from memsvc.storage import change_cause, owner_terms
from memsvc.storage.transactions import Transactions

# Below this much room (under the size limit or on the filesystem), a write that failed
# with a generic error is reported as storage full: a vector chunk sqlite-vec allocates in
# one piece takes up to a few MB.
ROOM_BYTES = 16 * 1024 * 1024
# PRAGMA values cannot be bound as parameters, so the accepted ones are whitelisted.
_SYNCHRONOUS_LEVELS = frozenset({"OFF", "NORMAL", "FULL", "EXTRA"})

#: SQL name of the Unicode case-folding function registered on every connection. SQLite's
#: own lower() and LIKE only fold ASCII, so "ÄPFEL" would not find "äpfel" without it.
CASEFOLD_FUNCTION = "memsvc_casefold"


def _casefold(value: object) -> object:
    return value.casefold() if isinstance(value, str) else value


def as_domain_error(exc: Exception) -> Exception:
    """apsw's disk-full error (SQLITE_FULL) as the core's StorageFullError; any other error unchanged."""
    return StorageFullError.no_space() if isinstance(exc, apsw.FullError) else exc


def scalar(conn: Any, sql: str, params: Any = ()) -> Any:
    """The first column of the first row `sql` returns (either driver's connection)."""
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise LookupError(f"no row from {sql[:60]!r}")
    return row[0]


def iso(dt: datetime | None) -> str | None:
    """Format as fixed-width `YYYY-MM-DDTHH:MM:SS.ffffffZ` in UTC.

    Fixed width and one time zone make text comparison equal instant comparison, so SQL can
    compare, sort and index the stored text directly (created_at < ?, ORDER BY created_at).
    A naive datetime is taken to be UTC already.
    """
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    u = dt.astimezone(UTC)
    # Formatted by hand: strftime("%Y") does not zero-pad years below 1000 on glibc.
    return f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}.{u.microsecond:06d}Z"


def parse_iso(s: str | None) -> datetime | None:
    """Inverse of `iso`: an aware UTC datetime. Strict, so a malformed stored value is
    noticed instead of silently mis-sorting."""
    if s is None:
        return None
    # The fixed-width form `iso` writes is parsed by fromisoformat (≈30× faster than
    # strptime, which dominated reading a page of rows); anything else goes through the
    # strict strptime and fails loudly.
    if len(s) == 27 and s[10] == "T" and s[19] == "." and s[26] == "Z" and s[20:26].isdigit():
        try:
            return datetime.fromisoformat(s[:26]).replace(tzinfo=UTC)
        except ValueError:
            pass
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


class Database(Transactions):
    """One SQLite file: a locked writer connection and lazily created per-thread readers (the
    transactions over them: `memsvc.storage.transactions`).

    `synchronous`: in WAL mode "NORMAL" is safe against the process being killed at any
    instant: COMMIT returns only after the transaction is written to the WAL file, which then
    lives in the OS page cache and is replayed by the next opener, so no acknowledged write
    is lost and the file stays consistent (WAL frames are checksummed; a torn tail is
    ignored). NORMAL skips the fsync per commit, so an OS crash or power loss may lose the
    last few commits (never corrupting the file). "FULL" fsyncs the WAL on every commit and is
    what survives power loss, at the cost of one fsync per write.

    `cache_mb`: page cache of each connection. The default 2 MB is too small for the hot
    path over a large file: bm25 reads one `docsize` row per matching row, and an owner's
    rows are spread over the whole file (bench/hot_path.py: 1.4 → 0.9 ms per keyword query at
    1M rows with 16 MB). Each connection's cache grows only as pages are read.

    `vec_extension_path`: the sqlite-vec library to load (default: the installed wheel's).
    Failing to load it is recorded in `vec_error`, not raised: keyword search still works
    without vectors, and the engine status reports why vectors are unavailable.
    """

    driver_error = apsw.Error
    begin_read = "BEGIN"
    # Takes the file's write lock up front (see the module docstring).
    begin_write = "BEGIN IMMEDIATE"
    reads_join_writes = False

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "NORMAL",
        busy_timeout_ms: int = 5000,
        cache_mb: int = 16,
        vec_extension_path: str | None = None,
    ) -> None:
        level = synchronous.upper()
        if level not in _SYNCHRONOUS_LEVELS:
            raise ValueError(f"synchronous must be one of {sorted(_SYNCHRONOUS_LEVELS)}, not {synchronous!r}")
        if busy_timeout_ms < 0:
            raise ValueError("busy_timeout_ms must be >= 0")
        if cache_mb < 1:
            raise ValueError("cache_mb must be >= 1")
        super().__init__()
        self.path = Path(path)
        self.synchronous = level
        self.busy_timeout_ms = int(busy_timeout_ms)
        self.cache_mb = int(cache_mb)
        self.vec_version: str | None = None
        self.vec_error: str | None = None
        #: Result of the last `integrity_check()` run in this process, None if never run.
        self.last_integrity_check: str | None = None
        self._vec_path = vec_extension_path or sqlite_vec.loadable_path()
        self._write_lock = threading.Lock()
        self._local = threading.local()
        self._readers: list[apsw.Connection] = []
        self._readers_lock = threading.Lock()
        self._watch: apsw.Connection | None = None  # see data_version
        self._watch_lock = threading.Lock()
        self._glance: apsw.Connection | None = None  # see data_version_nowait
        self._glance_lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # The writer opens first: it switches the file to WAL before any reader exists.
        self._writer = self._open(reader=False)

    # -- connections ---------------------------------------------------------------------

    def _open(self, *, reader: bool) -> apsw.Connection:
        conn = apsw.Connection(str(self.path))
        try:
            self._configure(conn, reader=reader)
        except BaseException:
            conn.close()
            raise
        return conn

    def _configure(self, conn: apsw.Connection, *, reader: bool) -> None:
        # Busy timeout first: switching to WAL briefly needs a lock another process may hold.
        conn.set_busy_timeout(self.busy_timeout_ms)
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchall()[0][0]
        if str(mode).lower() != "wal":
            # Without WAL readers would block the writer; refuse rather than degrade silently
            # (e.g. ":memory:" or a file system without shared memory support).
            raise RuntimeError(f"could not enable WAL journal mode on {self.path} (got {mode!r})")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")  # whitelisted in __init__
        conn.execute(f"PRAGMA cache_size={-1024 * self.cache_mb}")  # negative = KiB
        conn.create_scalar_function(CASEFOLD_FUNCTION, cast(Any, _casefold), 1, deterministic=True)
        owner_terms.register(conn)
        change_cause.register(conn)
        self._load_vec(conn)
        if reader:
            # Readers never write: enforcing it keeps every write on the locked writer.
            conn.execute("PRAGMA query_only=ON")
        else:
            # A deleted memory is forgotten: the pages and cells its text occupied are zeroed,
            # not left in the file's free space.
            conn.execute("PRAGMA secure_delete=ON")

    def _load_vec(self, conn: apsw.Connection) -> None:
        try:
            conn.enable_load_extension(True)
            try:
                conn.load_extension(self._vec_path)
            finally:
                # Keep the SQL-level load_extension() closed: only we load code.
                conn.enable_load_extension(False)
            version = conn.execute("SELECT vec_version()").fetchall()[0][0]
        except Exception as exc:  # noqa: BLE001 - any failure means "no vectors", not a crash
            self.vec_error = f"{type(exc).__name__}: {exc}"
            return
        self.vec_version = str(version)

    def _reader(self) -> apsw.Connection:
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open(reader=True)
            with self._readers_lock:
                if self._closed:
                    conn.close()
                    self._check_open()
                self._readers.append(conn)
            self._local.conn = conn
        return conn

    @contextmanager
    def _connection(self, writes: bool) -> Iterator[apsw.Connection]:
        """This thread's reader, or the writer under the write lock."""
        if not writes:
            yield self._reader()
            return
        with self._write_lock:
            self._check_open()
            yield self._writer

    def _in_transaction(self, conn: apsw.Connection) -> bool:
        return bool(conn.in_transaction)

    domain_error = staticmethod(as_domain_error)

    def _out_of_room(self, conn: apsw.Connection) -> bool:
        """An extension may report SQLITE_FULL as its own error (sqlite-vec: "Could not insert
        a new vector chunk") after SQLite rolled the transaction back: it is the lack of space
        when less than ROOM_BYTES is left under the size limit or on the filesystem."""
        page_size, pages, max_pages = (
            int(scalar(conn, f"PRAGMA {p}")) for p in ("page_size", "page_count", "max_page_count")
        )
        return (max_pages - pages) * page_size < ROOM_BYTES or self.free_bytes() < ROOM_BYTES

    # -- the file ------------------------------------------------------------------------

    def free_bytes(self) -> int:
        """Bytes left for writes on the database's filesystem: health reports a full disk by
        it before the writes start failing."""
        return shutil.disk_usage(self.path.parent).free

    def integrity_check(self) -> str:
        """Run `PRAGMA integrity_check` ("ok" when fine, else the problems, one a line).

        It reads the whole file, so it is for startup checks, tests and the CLI, not for
        health probes; the result is remembered in `last_integrity_check`.
        """
        with self.read() as conn:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        result = "\n".join(str(r[0]) for r in rows)
        self.last_integrity_check = result
        return result

    def data_version(self) -> int:
        """The database's change counter: a number that changes once any other connection
        (this process's writer, or any connection of another process on the same file) has
        committed since the last call. SQLite's `PRAGMA data_version`, read on a connection
        of its own that never writes nor holds a transaction, so it sees every commit as
        soon as it is made and its values compare across threads. A few microseconds: a
        cache of rows may ask before every lookup."""
        with self._watch_lock:
            if self._watch is None:
                self._check_open()
                self._watch = apsw.Connection(str(self.path))
                self._watch.set_busy_timeout(self.busy_timeout_ms)
                self._watch.execute("PRAGMA query_only=ON")
            return int(scalar(self._watch, "PRAGMA data_version"))

    def data_version_nowait(self) -> int | None:
        """As `data_version`, for the event loop: None instead of any wait. It reads on a
        connection of its own with no busy timeout (values compare only with this method's),
        so it never waits for a lock of SQLite's nor of this object's: when another thread
        is asking, or SQLite answers busy, the caller learns nothing and asks the store the
        slow way. An answer costs a look at the WAL index in shared memory, no disk I/O."""
        if not self._glance_lock.acquire(blocking=False):
            return None
        try:
            if self._glance is None:
                self._check_open()
                self._glance = apsw.Connection(str(self.path))
                self._glance.execute("PRAGMA query_only=ON")
            return int(scalar(self._glance, "PRAGMA data_version"))
        except apsw.BusyError:
            return None
        finally:
            self._glance_lock.release()

    def close(self) -> None:
        """Waits for a running write (readers of other threads are closed under them)."""
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            with self._readers_lock:
                readers, self._readers = self._readers, []
            with self._watch_lock:
                watch, self._watch = self._watch, None
            with self._glance_lock:
                glance, self._glance = self._glance, None
            for conn in [*readers, self._writer, *(c for c in (watch, glance) if c is not None)]:
                conn.close()
