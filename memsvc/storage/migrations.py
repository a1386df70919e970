"""The schema migration runner.

Migrations are the numbered `NNNN_name.sql` files of the `memsvc.migrations` package (the
repo's `migrations/` folder). Each one runs in its own write transaction together with the
`schema_migrations` row that records it, so a crash at any instant leaves it either fully
applied and recorded, or not applied at all. A database stamped with a version newer than
any file we ship was written by a newer memsvc: it is refused untouched, since an older
binary cannot know what the newer schema means.
"""

from __future__ import annotations

import re
from importlib import resources

import apsw

from memsvc.kernel.errors import StorageVersionError
from memsvc.kernel.models import utcnow
from memsvc.storage.database import Database, iso

_FILE_NAME = re.compile(r"^(\d{4})_([A-Za-z0-9_]+)\.sql$")
#: Where the SQLite migration files ship.
PACKAGE = "memsvc.migrations"

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
)
"""


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


def current_version(db: Database) -> int:
    """The newest version recorded in the database (0 for a fresh file). Changes nothing."""
    with db.read() as conn:
        if not _has_table(conn):
            return 0
        return _recorded_max(conn)


def apply_migrations(db: Database) -> list[int]:
    """Apply every shipped migration not yet recorded, oldest first; return their versions
    (empty when the schema is already current, so calling it again is a no-op).

    Raises StorageVersionError, changing nothing, when the database is newer than us.
    """
    migrations = available_migrations()
    known = max((v for v, _, _ in migrations), default=0)
    with db.write() as conn:
        conn.execute(_CREATE_TABLE)
        _refuse_if_newer(conn, known)
        done = _recorded_versions(conn)
    applied: list[int] = []
    for version, name, sql in migrations:
        if version in done:
            continue
        if _apply_one(db, version, name, sql, known):
            applied.append(version)
    return applied


def _apply_one(db: Database, version: int, name: str, sql: str, known: int) -> bool:
    """One migration and its record in one transaction. Re-checks inside the transaction
    because another process sharing the file may have applied it meanwhile."""
    with db.write() as conn:
        _refuse_if_newer(conn, known)
        if version in _recorded_versions(conn):
            return False
        # apsw runs every statement of a multi-statement string; draining the cursor makes
        # sure none is left pending should a script ever contain a row-returning statement.
        for _ in conn.execute(sql):
            pass
        conn.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (version, name, iso(utcnow())),
        )
    return True


def _refuse_if_newer(conn: apsw.Connection, known: int) -> None:
    recorded = _recorded_max(conn)
    if recorded > known:
        raise StorageVersionError(
            f"database schema version {recorded} is newer than this memsvc (knows up to {known}); "
            "upgrade memsvc or use another --data-dir",
            metadata={"database_version": str(recorded), "known_version": str(known)},
        )


def _has_table(conn: apsw.Connection) -> bool:
    rows = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchall()
    return bool(rows)


def _recorded_max(conn: apsw.Connection) -> int:
    return int(conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchall()[0][0])


def _recorded_versions(conn: apsw.Connection) -> set[int]:
    return {int(r[0]) for r in conn.execute("SELECT version FROM schema_migrations").fetchall()}
