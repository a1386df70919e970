"""The PostgreSQL side of the memory store: router memories in a database that many memsvc
processes share. Its dialect holds what PostgreSQL does its own way; `PgMemoryBackend` is the
memory store (`memsvc.storage.memory_store.SqlMemoryBackend`) bound to it.

Every rule that must hold across processes is one statement (see memory_store): a keyed create
is one `INSERT … ON CONFLICT (api_key_id, key) DO UPDATE`, so two replicas upserting one key
leave one row. Times are the server's `now()` (the transaction's start, one value for a whole
batch), the clock every replica shares. The keyword document (`search`) is a generated
column, so nothing here maintains an index.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from memsvc.kernel.cache import TtlCache
from memsvc.kernel.changes import ChangeCause
from memsvc.kernel.errors import ValidationError
from memsvc.kernel.models import KeywordHit, NewMemory, SearchScope, UpsertResult
from memsvc.storage import change_cause, lifecycle
from memsvc.storage.dialect import POSTGRES_SQL, Dialect, duplicate_key
from memsvc.storage.memory_store import DEFAULT_WORKING_SET_BYTES, SqlMemoryBackend
from memsvc.storage.postgres import keyword, timeline
from memsvc.storage.postgres.database import PgDatabase
from memsvc.storage.postgres.migrations import apply_migrations
from memsvc.storage.postgres.rows import RETURNING, casefold_collation, dump_metadata, folded, row_to_memory
from memsvc.storage.postgres.working_set_port import PgWorkingSetPort

# keep and occurred_at: given, they replace the stored ones; not given (NULL), an insert
# stores false / NULL and an upsert leaves the row's. A changed content is a new fact, valid
# from when it happened (the occurredAt given, else now), never before the one it replaces. `xmax = 0` only for a row this
# statement inserted (an updated row version carries the updating transaction's id).
_UPSERT = (
    "INSERT INTO memories AS mem (id, api_key_id, session_id, type, key, content, metadata, created_at, "
    "updated_at, expires_at, keep, occurred_at) VALUES (%(id)s, %(owner)s, %(session)s, %(type)s, %(key)s, "
    "%(content)s, %(metadata)s::jsonb, now(), now(), %(expires)s, coalesce(%(keep)s::boolean, false), "
    "%(occurred)s::timestamptz) "
    "ON CONFLICT (api_key_id, key) WHERE key IS NOT NULL DO UPDATE SET content = excluded.content, "
    "session_id = excluded.session_id, type = excluded.type, expires_at = excluded.expires_at, "
    "metadata = mem.metadata || excluded.metadata, updated_at = excluded.updated_at, "
    "keep = coalesce(%(keep)s::boolean, mem.keep), occurred_at = coalesce(excluded.occurred_at, mem.occurred_at), "
    "valid_from = CASE WHEN mem.content IS DISTINCT FROM excluded.content THEN greatest(coalesce("
    "excluded.occurred_at, now()), coalesce(mem.valid_from, mem.occurred_at, mem.created_at)) ELSE mem.valid_from END"
    + RETURNING
    + ", (mem.xmax = 0)"
)
_REWRITE = (
    "UPDATE memories m SET content = c.content, updated_at = now() "
    "FROM unnest(%s::text[], %s::text[]) AS c(id, content) WHERE m.id = c.id"
)
_TOUCH = (
    "UPDATE memories m SET access_count = m.access_count + t.n, last_accessed_at = now() "
    "FROM (SELECT u.id, u.n FROM memories x JOIN unnest(%s::text[], %s::bigint[]) AS u(id, n) "
    "ON x.id = u.id ORDER BY x.id FOR UPDATE OF x) AS t WHERE m.id = t.id"
)
_OWNER_KEY_INDEX = "idx_memories_owner_key"


class PgDialect(Dialect):
    """The memory store's PostgreSQL behaviour (see `memsvc.storage.dialect.Dialect`)."""

    def write_error(self, exc: Exception, key: str | None) -> Exception:
        """And a value the text and jsonb types refuse is bad input (the NUL rule refuses NUL
        before any statement; this is the net under it)."""
        if isinstance(exc, psycopg.DataError):
            return ValidationError.single("content", f"holds a value the database cannot store ({exc})")
        owner_key = isinstance(exc, pg_errors.UniqueViolation) and exc.diag.constraint_name == _OWNER_KEY_INDEX
        return duplicate_key(key) if key is not None and owner_key else exc

    def bind_cause(self, conn: psycopg.Connection, cause: ChangeCause, now: str | None) -> AbstractContextManager[Any]:
        """Settings local to the transaction, which the triggers read; they end with it."""
        change_cause.set_cause_in_transaction(conn, cause)
        return contextlib.nullcontext()

    def in_transaction(self, conn: psycopg.Connection) -> bool:
        return conn.info.transaction_status == TransactionStatus.INTRANS

    def draft(self, db: PgDatabase, conn: psycopg.Connection) -> AbstractContextManager[Any]:
        """A savepoint: a failed statement aborts a whole PostgreSQL transaction."""
        return db.savepoint(conn)

    def changes(self, conn: psycopg.Connection, cursor: Any) -> int:
        return int(cursor.rowcount)

    def clock(self) -> str | None:
        """None: statements use the server's now(), the clock every replica shares."""
        return None

    def upsert(self, conn: psycopg.Connection, memory: NewMemory, now: str | None) -> UpsertResult:
        params = {
            "id": str(uuid.uuid4()),
            "owner": memory.api_key_id,
            "session": memory.session_id,
            "type": memory.type,
            "key": memory.key,
            "content": memory.content,
            "metadata": dump_metadata(memory.metadata),
            "expires": memory.expires_at,
            "keep": memory.keep,
            "occurred": memory.occurred_at,
        }
        try:
            row = conn.execute(_UPSERT, params).fetchone()
        except psycopg.DataError as exc:
            raise self.write_error(exc, None) from exc
        assert row is not None  # an upsert returns its row
        stored = row_to_memory(row[:-1])
        return UpsertResult(id=stored.id, created=bool(row[-1]), memory=stored)

    def rewrite_contents(self, conn: psycopg.Connection, contents: Mapping[str, str], now: str | None) -> int:
        """One statement for all of them."""
        return int(conn.execute(_REWRITE, (list(contents), list(contents.values()))).rowcount)

    def touch(self, conn: psycopg.Connection, counts: Mapping[str, int], now: str | None) -> None:
        """One statement; the rows are locked in id order, so two replicas touching
        overlapping sets never deadlock."""
        ordered = sorted(counts)
        conn.execute(_TOUCH, (ordered, [counts[i] for i in ordered]))

    def search_keyword(
        self, conn: psycopg.Connection, scope: SearchScope, text: str, limit: int, cache: TtlCache[Any]
    ) -> list[KeywordHit]:
        """PostgreSQL full-text search ranked by BM25 (memsvc.storage.postgres.keyword)."""
        return keyword.search(conn, scope, text, limit, cache)

    def keyword_probe(self, conn: psycopg.Connection) -> None:
        keyword.probe(conn)

    def initialize(self, db: PgDatabase) -> str | None:
        """Migrate (replicas starting together queue on the runner's lock), then find the
        collation that folds every script."""
        apply_migrations(db)
        return casefold_collation(db.read)

    def contains(self, q: str, collation: str | None) -> tuple[str, list[Any]]:
        """strpos() has no wildcards, so "%" and "_" need no escaping."""
        needle, key = folded("?::text", collation), folded("coalesce(key, '')", collation)
        return f"(strpos({folded('content', collation)}, {needle}) > 0 OR strpos({key}, {needle}) > 0)", [q, q]

    def working_set_port(self, db: PgDatabase) -> PgWorkingSetPort:
        return PgWorkingSetPort(db)


POSTGRES = PgDialect(POSTGRES_SQL, timeline, row_to_memory, keyword.stats_cache, lifecycle.POSTGRES_FEED)


class PgMemoryBackend(SqlMemoryBackend):
    """The memory store on a shared PostgreSQL (see `memsvc.storage.postgres.database`)."""

    def __init__(self, database: PgDatabase, working_set_bytes: int = DEFAULT_WORKING_SET_BYTES) -> None:
        super().__init__(database, POSTGRES, working_set_bytes)
