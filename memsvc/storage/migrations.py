"""The schema migration runner.

Migrations are the numbered `NNNN_name.sql` files of the `memsvc.migrations` package (the
repo's `migrations/` folder). Each one runs in its own write transaction together with the
`schema_migrations` row that records it, so a crash at any instant leaves it either fully
applied and recorded, or not applied at all. A database stamped with a version newer than
any file we ship was written by a newer memsvc: it is refused untouched, since an older
binary cannot know what the newer schema means.

The runner is written once for both stores; what differs (where the files ship, the record
table's DDL, how a script runs, the PostgreSQL runner's lock) is a `Runner`
(memsvc.storage.postgres.migrations has PostgreSQL's).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from memsvc.kernel.errors import StorageVersionError
from memsvc.kernel.models import utcnow
from memsvc.storage.database import iso

_FILE_NAME = re.compile(r"^(\d{4})_([A-Za-z0-9_]+)\.sql$")
#: Where the SQLite migration files ship.
PACKAGE = "memsvc.migrations"


@dataclass(frozen=True)
class Runner:
    """What one store's runner does its own way (`conn`: that store's connection)."""

    package: str
    create_table: str
    has_table: Callable[[Any], bool]
    run_script: Callable[[Any, str], None]
    record: Callable[[Any, int, str], None]
    #: Taken first in every transaction of the runner (replicas queue on it); SQLite's
    #: write transaction already holds the file's lock.
    lock: Callable[[Any], None]
    #: Where else to point a memsvc that refuses a newer schema.
    elsewhere: str


def _drain(conn: Any, sql: str) -> None:
    """apsw runs every statement of a multi-statement string; draining the cursor makes sure
    none is left pending should a script ever contain a row-returning statement."""
    for _ in conn.execute(sql):
        pass


SQLITE = Runner(
    package=PACKAGE,
    create_table="CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
    "name TEXT NOT NULL, applied_at TEXT NOT NULL)",
    has_table=lambda conn: bool(
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").fetchall()
    ),
    run_script=_drain,
    record=lambda conn, version, name: conn.execute(
        "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)", (version, name, iso(utcnow()))
    ),
    lock=lambda conn: None,
    elsewhere="another --data-dir",
)
_CREATE_TABLE = SQLITE.create_table


def available_migrations(package: str = PACKAGE) -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migration file shipped in `package` (the SQLite ones
    by default; the PostgreSQL runner passes its own), in version order."""
    found: list[tuple[int, str, str]] = []
    for entry in resources.files(package).iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found.append((int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if len(set(versions)) != len(versions):
        raise RuntimeError(f"two migration files of {package} share a version number: {versions}")
    return found


def latest_version(package: str = PACKAGE) -> int:
    """The newest schema version of `package` this memsvc knows (0 when it ships none)."""
    return max((v for v, _, _ in available_migrations(package)), default=0)


def current_version(db: Any, runner: Runner = SQLITE) -> int:
    """The newest version recorded in the database (0 for a fresh one). Changes nothing."""
    with db.read() as conn:
        if not runner.has_table(conn):
            return 0
        return _recorded_max(conn)


def apply_migrations(db: Any, runner: Runner = SQLITE) -> list[int]:
    """Apply every shipped migration not yet recorded, oldest first; return the versions
    this call applied (empty when the schema is already current, or another process applied
    them, so calling it again is a no-op).

    Raises StorageVersionError, changing nothing, when the database is newer than us.
    """
    migrations = available_migrations(runner.package)
    known = max((v for v, _, _ in migrations), default=0)
    with db.write() as conn:
        runner.lock(conn)
        conn.execute(runner.create_table)
        _refuse_if_newer(conn, known, runner)
        done = _recorded_versions(conn)
    return [
        version
        for version, name, sql in migrations
        if version not in done and _apply_one(db, version, name, sql, known, runner)
    ]


def _apply_one(db: Any, version: int, name: str, sql: str, known: int, runner: Runner = SQLITE) -> bool:
    """One migration and its record in one transaction. Re-checks inside the transaction
    because another process sharing the database may have applied it meanwhile."""
    with db.write() as conn:
        runner.lock(conn)
        _refuse_if_newer(conn, known, runner)
        if version in _recorded_versions(conn):
            return False
        runner.run_script(conn, sql)
        runner.record(conn, version, name)
    return True


def _refuse_if_newer(conn: Any, known: int, runner: Runner) -> None:
    recorded = _recorded_max(conn)
    if recorded > known:
        raise StorageVersionError(
            f"database schema version {recorded} is newer than this memsvc (knows up to {known}); "
            f"upgrade memsvc or use {runner.elsewhere}",
            metadata={"database_version": str(recorded), "known_version": str(known)},
        )


def _recorded_max(conn: Any) -> int:
    return int(conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchall()[0][0])


def _recorded_versions(conn: Any) -> set[int]:
    return {int(r[0]) for r in conn.execute("SELECT version FROM schema_migrations").fetchall()}
