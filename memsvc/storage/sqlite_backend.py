"""The SQLite side of the memory store: its dialect (the statements SQLite writes its own
way, apsw's errors, its row conversion) and `SqliteMemoryBackend`, the memory store bound to
it. The store itself is `memsvc.storage.memory_store.SqlMemoryBackend`.

The FTS5 index follows the rows through the triggers of migration 0001, so nothing here
writes to memory_fts itself.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, cast

import apsw

from memsvc.kernel.cache import TtlCache
from memsvc.kernel.changes import ChangeCause
from memsvc.kernel.inline import may_block
from memsvc.kernel.models import KeywordHit, Memory, NewMemory, SearchScope, UpsertResult, utcnow
from memsvc.storage import change_cause, history_triggers, keyword, lifecycle, timeline
from memsvc.storage.database import CASEFOLD_FUNCTION, Database, iso
from memsvc.storage.dialect import SQLITE_SQL, Dialect, duplicate_key
from memsvc.storage.memory_rows import RETURNING, dump_metadata, row_to_memory
from memsvc.storage.memory_store import AGED_COUNT_CAP, DEFAULT_WORKING_SET_BYTES, SqlMemoryBackend
from memsvc.storage.migrations import apply_migrations
from memsvc.storage.working_set_port import SqliteWorkingSetPort

__all__ = ["AGED_COUNT_CAP", "DEFAULT_WORKING_SET_BYTES", "SQLITE", "SqliteDialect", "SqliteMemoryBackend"]

# memory_id is computed in the INSERT itself, inside the write transaction that holds the
# database's write lock, so two inserts can never pick the same value.
_INSERT = (
    "INSERT INTO memories (id, memory_id, api_key_id, session_id, type, key, content, "
    "metadata, created_at, updated_at, expires_at, keep, occurred_at) "
    "VALUES (?, (SELECT value + 1 FROM sequences WHERE name = 'memory_id'), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# A changed content is a new fact: valid from when it happened (the occurredAt given, else
# now), never before the fact it replaces (every SET reads the old row).
_UPSERT_IN_PLACE = (
    "UPDATE memories SET content = ?1, session_id = ?2, type = ?3, expires_at = ?4, metadata = ?5, updated_at = ?6, "
    "keep = COALESCE(?7, keep), occurred_at = COALESCE(?8, occurred_at), "
    "valid_from = CASE WHEN content IS NOT ?1 THEN max(COALESCE(?8, ?6), COALESCE(valid_from, occurred_at, created_at)) "
    "ELSE valid_from END WHERE id = ?9" + RETURNING
)
# Case-insensitive substring on content or key. instr() has no wildcards, so "%" and "_" in
# q are literal without any escaping; the registered casefold function folds all of
# Unicode (SQLite's lower()/LIKE fold only ASCII).
_Q_CLAUSE = f"(instr({CASEFOLD_FUNCTION}(content), ?) > 0 OR instr({CASEFOLD_FUNCTION}(COALESCE(key, '')), ?) > 0)"
_OWNER_KEY = "UNIQUE constraint failed: memories.api_key_id, memories.key"


class SqliteDialect(Dialect):
    """The memory store's SQLite behaviour (see `memsvc.storage.dialect.Dialect`)."""

    def write_error(self, exc: Exception, key: str | None) -> Exception:
        if key is not None and isinstance(exc, apsw.ConstraintError) and _OWNER_KEY in str(exc):
            return duplicate_key(key)
        return exc

    def bind_cause(self, conn: apsw.Connection, cause: ChangeCause, now: str | None) -> AbstractContextManager[Any]:
        """The triggers call memsvc_change() on this thread, the writer's (one at a time)."""
        return change_cause.bound_on_this_thread(cause, now)

    def in_transaction(self, conn: apsw.Connection) -> bool:
        return bool(conn.in_transaction)

    def draft(self, db: Database, conn: apsw.Connection) -> AbstractContextManager[Any]:
        """No savepoint per draft: a draft's only write is one statement, and SQLite undoes
        a failed statement alone, triggers included, leaving the transaction open. (A
        savepoint around each draft costs about a fifth of the batch: every page then
        changed is copied to the savepoint's journal.)"""
        return contextlib.nullcontext()

    def changes(self, conn: apsw.Connection, cursor: Any) -> int:
        return int(conn.changes())

    def clock(self) -> str | None:
        """Python's clock, once per transaction: every row of a batch gets the same time."""
        return iso(utcnow())

    def upsert(self, conn: apsw.Connection, memory: NewMemory, now: str | None) -> UpsertResult:
        """The owner's row with the key, when there is one, updated in place; else an INSERT.
        Exactly one statement writes (a read first is safe: this connection holds the
        file's write lock)."""
        if memory.key is not None:
            found = conn.execute(
                "SELECT id, metadata FROM memories WHERE api_key_id = ? AND key = ?", (memory.api_key_id, memory.key)
            ).fetchall()
            if found:
                stored = self._upsert_in_place(conn, str(found[0][0]), cast(str | None, found[0][1]), memory, now)
                return UpsertResult(id=stored.id, created=False, memory=stored)
        row = conn.execute(
            _INSERT + RETURNING,
            (
                str(uuid.uuid4()),
                memory.api_key_id,
                memory.session_id,
                memory.type,
                memory.key,
                memory.content,
                dump_metadata(memory.metadata),
                now,
                now,
                iso(memory.expires_at),
                int(bool(memory.keep)),
                iso(memory.occurred_at),
            ),
        ).fetchall()[0]
        stored = row_to_memory(row)
        return UpsertResult(id=stored.id, created=True, memory=stored)

    @staticmethod
    def _upsert_in_place(
        conn: apsw.Connection, row_id: str, stored: str | None, memory: NewMemory, now: str | None
    ) -> Memory:
        merged = {**(json.loads(stored) if stored else {}), **memory.metadata}
        row = conn.execute(
            _UPSERT_IN_PLACE,
            (
                memory.content,
                memory.session_id,
                memory.type,
                iso(memory.expires_at),
                dump_metadata(merged),
                now,
                None if memory.keep is None else int(memory.keep),
                iso(memory.occurred_at),
                row_id,
            ),
        ).fetchall()[0]
        return row_to_memory(row)

    def rewrite_contents(self, conn: apsw.Connection, contents: Mapping[str, str], now: str | None) -> int:
        changed = 0
        for memory_id, content in contents.items():
            conn.execute("UPDATE memories SET content = ?, updated_at = ? WHERE id = ?", (content, now, memory_id))
            changed += conn.changes()
        return changed

    def touch(self, conn: apsw.Connection, counts: Mapping[str, int], now: str | None) -> None:
        """One indexed point update per id: the single UPDATE with a correlated json_each
        lookup per row was quadratic in the batch. Leaves the FTS index alone (its update
        trigger only fires on content/key changes)."""
        conn.executemany(
            "UPDATE memories SET access_count = access_count + ?, last_accessed_at = ? WHERE id = ?",
            [(n, now, memory_id) for memory_id, n in counts.items()],
        )

    def search_keyword(
        self, conn: apsw.Connection, scope: SearchScope, text: str, limit: int, cache: TtlCache[Any]
    ) -> list[KeywordHit]:
        """FTS5 (memsvc.storage.keyword); a search that may take a while on the event loop's
        thread is flagged (memsvc.kernel.inline)."""
        may_block("a keyword search in the store")
        return keyword.search(conn, scope, text, limit, cache)

    def keyword_probe(self, conn: apsw.Connection) -> None:
        """A real MATCH on both FTS5 indexes."""
        conn.execute("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH '\"memsvc_probe\"'").fetchall()
        conn.execute("SELECT count(*) FROM memory_fts_cjk WHERE memory_fts_cjk MATCH '\"探测器\"'").fetchall()

    def initialize(self, db: Database) -> str | None:
        """Migrate, then give the writer connection its history triggers."""
        apply_migrations(db)
        with db.write() as conn:
            history_triggers.install(conn)
        return None

    def contains(self, q: str, collation: str | None) -> tuple[str, list[Any]]:
        folded = q.casefold()
        return _Q_CLAUSE, [folded, folded]

    def health_facts(self, db: Database) -> dict[str, object]:
        """sqlite-vec's version (or why it did not load) and the last integrity check."""
        return {
            "vec_version": db.vec_version,
            "vec_error": db.vec_error,
            "integrity": db.last_integrity_check or "unchecked",
        }

    def health_measures(self, db: Database) -> dict[str, object]:
        """The room left on the file's disk: a full disk shows here before writes fail."""
        return {"free_bytes": db.free_bytes()}

    def working_set_port(self, db: Database) -> SqliteWorkingSetPort:
        return SqliteWorkingSetPort()


SQLITE = SqliteDialect(SQLITE_SQL, timeline, row_to_memory, keyword.doc_counts, lifecycle.SQLITE_FEED)


class SqliteMemoryBackend(SqlMemoryBackend):
    """The memory store on one SQLite file (see `memsvc.storage.database.Database`)."""

    def __init__(self, db: Database, working_set_bytes: int = DEFAULT_WORKING_SET_BYTES) -> None:
        super().__init__(db, SQLITE, working_set_bytes)
