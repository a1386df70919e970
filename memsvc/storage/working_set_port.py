"""The store's side of the working sets (memsvc.working_set): an owner's snapshot, its newest
change number and the rows changed since a version, read from the store's change log, and
FTS5's own tokenizer (apsw, in memory), so a PostgreSQL replica ranks an owner's keyword
search exactly as a SQLite node does. `WorkingSetPort` holds what both stores share; each
keeps its change log's read (SQLite's global sequence of migration 0010 here, PostgreSQL's
per-owner log in memsvc.storage.postgres.working_set_port)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

import apsw

from memsvc.kernel.models import Memory
from memsvc.storage import owner_terms
from memsvc.storage.database import scalar
from memsvc.storage.dialect import SQLITE_SQL, Syntax
from memsvc.storage.memory_rows import M_COLUMNS, SELECT, row_to_memory

#: How many changes SQLite's log keeps (the trigger of migration 0010 prunes older ones).
CHANGE_LOG_ROWS = 100_000
_VERSION = "SELECT seq FROM memory_owner_versions WHERE api_key_id = ?"
_OWNER = SELECT + " WHERE api_key_id = ?"


def owner_version(conn: Any, owner: str, syntax: Syntax, db: Any = None) -> int:
    """The owner's newest change number in this snapshot (0: none recorded); read once per
    read transaction of `db` when it keeps a memo per snapshot (PgDatabase.snapshot_memo)."""
    memo = db.snapshot_memo(conn) if db is not None else None
    key = ("owner_version", owner)
    if memo is not None and key in memo:
        return int(memo[key])
    row = conn.execute(syntax.sql(_VERSION), (owner,)).fetchone()
    version = int(row[0]) if row else 0
    if memo is not None:
        memo[key] = version
    return version


class WorkingSetPort:
    """Reads for `memsvc.working_set.WorkingSets`, each inside the caller's snapshot (`db`:
    the database whose read snapshots may keep the owner's number; None: read it every time)."""

    syntax: ClassVar[Syntax]

    @staticmethod
    def row_to_memory(row: Sequence[Any]) -> Memory:
        """A `memory_rows.COLUMNS` row of this store as a Memory."""
        raise NotImplementedError

    def __init__(self, db: Any = None) -> None:
        self._db = db
        # FTS5's own tokenizer, from a private connection: the same C code the index uses,
        # callable from any thread (it holds no state between calls).
        self._tokenizer = owner_terms.word_tokenizer(apsw.Connection(":memory:"))

    def tokenize_document(self, text: str) -> list[str]:
        return owner_terms.tokens(self._tokenizer, text, apsw.FTS5_TOKENIZE_DOCUMENT)

    def tokenize_query(self, text: str) -> list[str]:
        return owner_terms.tokens(self._tokenizer, text, apsw.FTS5_TOKENIZE_QUERY)

    def owner_version(self, conn: Any, owner: str) -> int:
        return owner_version(conn, owner, self.syntax, self._db)

    def load_owner(self, conn: Any, owner: str) -> tuple[int, list[Memory]]:
        version = self.owner_version(conn, owner)  # before the rows: a set may only be newer than it records
        rows = conn.execute(self.syntax.sql(_OWNER), (owner,)).fetchall()
        return version, [self.row_to_memory(r) for r in rows]


class SqliteWorkingSetPort(WorkingSetPort):
    syntax = SQLITE_SQL
    row_to_memory = staticmethod(row_to_memory)

    @staticmethod
    def changes_since(conn: apsw.Connection, owner: str, version: int) -> tuple[list[int], list[Memory]] | None:
        newest = scalar(conn, "SELECT max(seq) FROM memory_changes") or 0
        if version < newest - CHANGE_LOG_ROWS:
            return None
        ids = [
            int(r[0])
            for r in conn.execute(
                "SELECT DISTINCT memory_id FROM memory_changes WHERE api_key_id = ? AND seq > ?", (owner, version)
            )
        ]
        rows = conn.execute(
            f"SELECT {M_COLUMNS} FROM json_each(?) j CROSS JOIN memories m "
            "ON m.memory_id = j.value WHERE m.api_key_id = ?",
            (json.dumps(ids), owner),
        ).fetchall()
        return ids, [row_to_memory(r) for r in rows]
