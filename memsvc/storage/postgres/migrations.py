"""The PostgreSQL schema migration runner.

Migrations are the numbered `NNNN_name.sql` files of `memsvc.migrations.postgres` (the repo's
`migrations/postgres/` folder), applied as the SQLite runner applies its own: each in one
transaction together with the `schema_migrations` row that records it, so a crash leaves it
fully applied and recorded or not applied at all; a database stamped with a version newer
than any file shipped here was written by a newer memsvc and is refused untouched.

Several replicas may start at once against one database. Every transaction of the runner
first takes one transaction-scoped advisory lock, so they queue: the first applies a
migration, the others then find its row and skip it. Each migration is applied exactly once.
"""

from __future__ import annotations

import psycopg

from memsvc.kernel.errors import StorageVersionError
from memsvc.storage import migrations
from memsvc.storage.postgres.database import PgDatabase

#: Where the PostgreSQL migration files ship (read by the same file walk as the SQLite ones).
PACKAGE = "memsvc.migrations.postgres"
#: The advisory lock every runner transaction takes (any constant; "memsvcmg" in ASCII).
_LOCK_KEY = 0x6D656D7376636D67

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


def available_migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every shipped PostgreSQL migration file, in version order."""
    return migrations.available_migrations(PACKAGE)


def latest_version() -> int:
    """The newest PostgreSQL schema version this memsvc knows (0 when it ships none)."""
    return migrations.latest_version(PACKAGE)


def current_version(db: PgDatabase) -> int:
    """The newest version recorded in the database (0 for an empty one). Changes nothing."""
    with db.read() as conn:
        if conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0] is None:
            return 0
        return _recorded_max(conn)


def apply_migrations(db: PgDatabase) -> list[int]:
    """Apply every shipped migration not yet recorded, oldest first; return the versions
    this call applied (empty when the schema is current, or another replica applied them).

    Raises StorageVersionError, changing nothing, when the database is newer than us.
    """
    shipped = available_migrations()
    known = max((v for v, _, _ in shipped), default=0)
    with db.write() as conn:
        _lock(conn)
        conn.execute(_CREATE_TABLE)
        _refuse_if_newer(conn, known)
        done = _recorded_versions(conn)
    return [version for version, name, sql in shipped
            if version not in done and _apply_one(db, version, name, sql, known)]


def _apply_one(db: PgDatabase, version: int, name: str, sql: str, known: int) -> bool:
    """One migration and its record in one transaction, under the lock. Re-checks after
    taking it: another replica may have applied the migration while this one waited."""
    with db.write() as conn:
        _lock(conn)
        _refuse_if_newer(conn, known)
        if version in _recorded_versions(conn):
            return False
        conn.execute(sql)  # no parameters: the file's statements run as one script
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name))
    return True


def _lock(conn: psycopg.Connection) -> None:
    """Wait for the runners of other replicas; released when this transaction ends. A
    migration may build an index over every row and another replica's may hold the lock
    that long: the statement timeout that bounds requests is lifted for this transaction."""
    conn.execute("SET LOCAL statement_timeout = 0")
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))


def _refuse_if_newer(conn: psycopg.Connection, known: int) -> None:
    recorded = _recorded_max(conn)
    if recorded > known:
        raise StorageVersionError(
            f"database schema version {recorded} is newer than this memsvc (knows up to {known}); "
            "upgrade memsvc or use another database",
            metadata={"database_version": str(recorded), "known_version": str(known)},
        )


def _recorded_max(conn: psycopg.Connection) -> int:
    return int(conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0])


def _recorded_versions(conn: psycopg.Connection) -> set[int]:
    return {int(r[0]) for r in conn.execute("SELECT version FROM schema_migrations").fetchall()}
