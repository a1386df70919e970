"""The SQLite store's side of the working sets (memsvc.working_set): an owner's snapshot,
its newest change number and the rows changed since a version, read from the change
sequence of migration 0010, and the tokenizer the store's keyword index uses."""

from __future__ import annotations

import json

import apsw

from memsvc.kernel.models import Memory
from memsvc.storage import owner_terms
from memsvc.storage.memory_rows import COLUMNS, M_COLUMNS, row_to_memory

#: How many changes the log keeps (the trigger of migration 0010 prunes older ones).
CHANGE_LOG_ROWS = 100_000


class SqliteWorkingSetPort:
    """Reads for `memsvc.working_set.WorkingSets`, each inside the caller's snapshot."""

    def __init__(self) -> None:
        # FTS5's own tokenizer, from a private connection: the same C code the index uses,
        # callable from any thread (it holds no state between calls).
        self._tokenizer = owner_terms.word_tokenizer(apsw.Connection(":memory:"))

    def tokenize_document(self, text: str) -> list[str]:
        return owner_terms.tokens(self._tokenizer, text, apsw.FTS5_TOKENIZE_DOCUMENT)

    def tokenize_query(self, text: str) -> list[str]:
        return owner_terms.tokens(self._tokenizer, text, apsw.FTS5_TOKENIZE_QUERY)

    @staticmethod
    def owner_version(conn: apsw.Connection, owner: str) -> int:
        row = conn.execute("SELECT seq FROM memory_owner_versions WHERE api_key_id = ?", (owner,)).fetchone()
        return int(row[0]) if row else 0

    def load_owner(self, conn: apsw.Connection, owner: str) -> tuple[int, list[Memory]]:
        rows = conn.execute(f"SELECT {COLUMNS} FROM memories WHERE api_key_id = ?", (owner,)).fetchall()
        return self.owner_version(conn, owner), [row_to_memory(r) for r in rows]

    @staticmethod
    def changes_since(conn: apsw.Connection, owner: str,
                      version: int) -> tuple[list[int], list[Memory]] | None:
        newest = conn.execute("SELECT max(seq) FROM memory_changes").fetchone()[0] or 0
        if version < newest - CHANGE_LOG_ROWS:
            return None
        ids = [int(r[0]) for r in conn.execute(
            "SELECT DISTINCT memory_id FROM memory_changes WHERE api_key_id = ? AND seq > ?", (owner, version))]
        rows = conn.execute(f"SELECT {M_COLUMNS} FROM json_each(?) j CROSS JOIN memories m "
                            "ON m.memory_id = j.value WHERE m.api_key_id = ?", (json.dumps(ids), owner)).fetchall()
        return ids, [row_to_memory(r) for r in rows]
