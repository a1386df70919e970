"""PostgreSQL's side of the working sets (`memsvc.storage.working_set_port`): the memories
changed since a version, read from the per-owner change log of migration 0002.

Why these reads are correct under concurrent writers: the change numbers are per owner and
handed out under the owner's row lock held to the commit (see the migration), so in any
snapshot the changes an owner's counter covers are exactly the committed ones numbered up to
it. `PgDatabase.read()` is one REPEATABLE READ snapshot; a read nested in a READ COMMITTED
write sees newer rows statement by statement, which is still safe here: every method reads
the version before the rows, so rows can only be newer than the version a set records (the
next search applies the same changes again), never older.

The owner's number is read once per snapshot (`owner_version`, kept in the snapshot's memo):
a Retrieve asks it for its keyword search, its vector block (memsvc.storage.postgres.
vector_blocks follows the same log) and its conversation signals, and in one REPEATABLE READ
snapshot the answer cannot change."""

from __future__ import annotations

from typing import Any

from memsvc.kernel.models import Memory
from memsvc.storage.dialect import POSTGRES_SQL
from memsvc.storage.memory_rows import M_COLUMNS
from memsvc.storage.postgres.rows import row_to_memory
from memsvc.storage.working_set_port import WorkingSetPort

#: How many change numbers of an owner the log keeps at least (migration 0002 prunes the
#: older ones, every 100th number): a set further behind rebuilds.
CHANGE_LOG_VERSIONS = 10_000

# One statement: the owner's version, and (only when the log still reaches `since`) each
# memory changed after `since` with its row when it still exists in the owner (NULLs when not).
_CHANGES = (
    f"SELECT v.seq, c.memory_id, {M_COLUMNS} FROM (SELECT coalesce(max(seq), 0) AS seq FROM memory_owner_versions "
    "WHERE api_key_id = %(owner)s) AS v "
    "LEFT JOIN (SELECT DISTINCT memory_id FROM memory_owner_changes WHERE api_key_id = %(owner)s "
    "AND seq > %(since)s) AS c ON %(since)s >= v.seq - %(kept)s "
    "LEFT JOIN memories m ON m.memory_id = c.memory_id AND m.api_key_id = %(owner)s"
)
_FIRST_COLUMN = 2


class PgWorkingSetPort(WorkingSetPort):
    syntax = POSTGRES_SQL
    row_to_memory = staticmethod(row_to_memory)

    @staticmethod
    def changes_since(conn: Any, owner: str, version: int) -> tuple[list[int], list[Memory]] | None:
        rows = conn.execute(_CHANGES, {"owner": owner, "since": version, "kept": CHANGE_LOG_VERSIONS}).fetchall()
        if version < int(rows[0][0]) - CHANGE_LOG_VERSIONS:
            return None
        ids = [int(r[1]) for r in rows if r[1] is not None]
        return ids, [row_to_memory(r[_FIRST_COLUMN:]) for r in rows if r[_FIRST_COLUMN] is not None]
