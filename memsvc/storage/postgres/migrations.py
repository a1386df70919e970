"""The PostgreSQL schema migration runner.

Migrations are the numbered `NNNN_name.sql` files of `memsvc.migrations.postgres` (the repo's
`migrations/postgres/` folder), applied as the SQLite runner applies its own: each in one
transaction together with the `schema_migrations` row that records it, so a crash leaves it
fully applied and recorded or not applied at all; a database stamped with a version newer
than any file shipped here was written by a newer memsvc and is refused untouched.

Several replicas may start at once against one database. Every transaction of the runner
first takes one transaction-scoped advisory lock, so they queue: the first applies a
migration, the others then find its row and skip it. Each migration is applied exactly once.

The runner is SQLite's (memsvc.storage.migrations); `RUNNER` is what PostgreSQL does its own way.
"""

from __future__ import annotations

from typing import Any

from memsvc.storage import migrations
from memsvc.storage.postgres.database import PgDatabase

#: Where the PostgreSQL migration files ship (read by the same file walk as the SQLite ones).
PACKAGE = "memsvc.migrations.postgres"
#: The advisory lock every runner transaction takes (any constant; "memsvcmg" in ASCII).
_LOCK_KEY = 0x6D656D7376636D67


def _lock(conn: Any) -> None:
    """Wait for the runners of other replicas; released when this transaction ends. A
    migration may build an index over every row and another replica's may hold the lock
    that long: the statement timeout that bounds requests is lifted for this transaction."""
    conn.execute("SET LOCAL statement_timeout = 0")
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))


RUNNER = migrations.Runner(
    package=PACKAGE,
    create_table="CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, "
    "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
    has_table=lambda conn: conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0] is not None,
    # No parameters: the file's statements run as one script.
    run_script=lambda conn, sql: conn.execute(sql),
    record=lambda conn, version, name: conn.execute(
        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name)
    ),
    lock=_lock,
    elsewhere="another database",
)


def available_migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every shipped PostgreSQL migration file, in version order."""
    return migrations.available_migrations(PACKAGE)


def latest_version() -> int:
    """The newest PostgreSQL schema version this memsvc knows (0 when it ships none)."""
    return migrations.latest_version(PACKAGE)


def current_version(db: PgDatabase) -> int:
    """The newest version recorded in the database (0 for an empty one). Changes nothing."""
    return migrations.current_version(db, RUNNER)


def apply_migrations(db: PgDatabase) -> list[int]:
    """PostgreSQL's migrations, applied by the one runner (see the module docstring)."""
    return migrations.apply_migrations(db, RUNNER)
