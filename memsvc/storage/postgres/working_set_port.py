"""The PostgreSQL store's side of the working sets (memsvc.working_set): an owner's
snapshot, its newest change number and the memories changed since a version, read from the
per-owner change log of migration 0002, and FTS5's own tokenizer (apsw, in memory), so a
PostgreSQL replica ranks an owner's keyword search exactly as a SQLite node does.

Why these reads are correct under concurrent writers: the change numbers are per owner and
handed out under the owner's row lock held to the commit (see the migration), so in any
snapshot the changes an owner's counter covers are exactly the committed ones numbered up to
it. `PgDatabase.read()` is one REPEATABLE READ snapshot; a read nested in a READ COMMITTED
write sees newer rows statement by statement, which is still safe here: every method reads
the version before the rows, so rows can only be newer than the version a set records (the
next search applies the same changes again), never older.

The owner's number is read once per snapshot (`owner_version`, kept in the snapshot's memo):
a Retrieve asks it for its keyword search, its vector block (memsvc.storage.postgres.
vector_index follows the same log) and its conversation signals, and in one REPEATABLE READ
snapshot the answer cannot change."""

from __future__ import annotations

from typing import Any

from memsvc.kernel.models import Memory
from memsvc.storage.postgres.database import PgDatabase
from memsvc.storage.postgres.rows import M_COLUMNS, SELECT, row_to_memory
from memsvc.storage.working_set_port import SqliteWorkingSetPort

#: How many change numbers of an owner the log keeps at least (migration 0002 prunes the
#: older ones, every 100th number): a set further behind rebuilds.
CHANGE_LOG_VERSIONS = 10_000

_VERSION = "SELECT seq FROM memory_owner_versions WHERE api_key_id = %s"
# One statement: the owner's version, and (only when the log still reaches `since`) each
# memory changed after `since` with its row when it still exists in the owner (NULLs when not).
_CHANGES = (
    "SELECT v.seq, c.memory_id, {m} FROM (SELECT coalesce(max(seq), 0) AS seq FROM memory_owner_versions "
    "WHERE api_key_id = %(owner)s) AS v "
    "LEFT JOIN (SELECT DISTINCT memory_id FROM memory_owner_changes WHERE api_key_id = %(owner)s "
    "AND seq > %(since)s) AS c ON %(since)s >= v.seq - %(kept)s "
    "LEFT JOIN memories m ON m.memory_id = c.memory_id AND m.api_key_id = %(owner)s"
).format(m=M_COLUMNS)
_FIRST_COLUMN = 2


def owner_version(db: PgDatabase | None, conn: Any, owner: str) -> int:
    """The owner's newest change number in this snapshot (0: none recorded), read once per
    read transaction of `db` (see the module docstring)."""
    memo = db.snapshot_memo(conn) if db is not None else None
    key = ("owner_version", owner)
    if memo is not None and key in memo:
        return memo[key]
    row = conn.execute(_VERSION, (owner,)).fetchone()
    version = int(row[0]) if row else 0
    if memo is not None:
        memo[key] = version
    return version


class PgWorkingSetPort:
    """Reads for `memsvc.working_set.WorkingSets`, each inside the caller's transaction
    (`db`: the database whose read snapshots may keep the owner's number; None: read it
    every time)."""

    def __init__(self, db: PgDatabase | None = None) -> None:
        self._db = db
        # The SQLite port's tokenizer is FTS5's porter/unicode61 from a private in-memory
        # apsw connection: no SQLite database is involved, and sharing it keeps one definition.
        words = SqliteWorkingSetPort()
        self.tokenize_document = words.tokenize_document
        self.tokenize_query = words.tokenize_query

    def owner_version(self, conn: Any, owner: str) -> int:
        return owner_version(self._db, conn, owner)

    def load_owner(self, conn: Any, owner: str) -> tuple[int, list[Memory]]:
        version = self.owner_version(conn, owner)  # before the rows: see the module docstring
        rows = conn.execute(SELECT + " WHERE api_key_id = %s", (owner,)).fetchall()
        return version, [row_to_memory(r) for r in rows]

    @staticmethod
    def changes_since(conn: Any, owner: str, version: int) -> tuple[list[int], list[Memory]] | None:
        rows = conn.execute(_CHANGES, {"owner": owner, "since": version, "kept": CHANGE_LOG_VERSIONS}).fetchall()
        if version < int(rows[0][0]) - CHANGE_LOG_VERSIONS:
            return None
        ids = [int(r[1]) for r in rows if r[1] is not None]
        return ids, [row_to_memory(r[_FIRST_COLUMN:]) for r in rows if r[_FIRST_COLUMN] is not None]
