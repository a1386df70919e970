"""The PostgreSQL MemoryBackend: router memories in a database that many memsvc processes
share, with the behaviour of the SQLite backend (the same methods, the same results).

Why it is written the way it is: other processes write the same rows at the same time, and
a write transaction here is READ COMMITTED, so every rule that must hold across processes is
one statement, never a read followed by a write. A keyed create is one
`INSERT … ON CONFLICT (api_key_id, key) DO UPDATE` (two replicas upserting one key leave
one row); an update is one `UPDATE … SET col = coalesce(new, col)` (two patches of different
fields both land); the key check of an update is the unique index itself. Times are the
database server's clock (`now()`, the transaction's start, one value for a whole batch as
SQLite's one `utcnow()`), the clock every replica shares.

Every statement binds user values as parameters; the only text joined into SQL is fixed
fragments (see `rows` and `keyword`). The keyword document (`search`) is a generated column,
so this module never maintains an index itself.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, ContextManager

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from memsvc.kernel.errors import ConflictError, ValidationError, shorten
from memsvc.kernel.models import (MEMORY_TYPES, KeywordHit, Memory, MemoryFilter, MemoryPage, MemoryPatch, NewMemory,
                                SearchScope, UpsertResult)
from memsvc.kernel.time_phrases import TimeWindow
from memsvc.storage.postgres import keyword, timeline
from memsvc.storage.postgres.database import PgDatabase
from memsvc.storage.postgres.migrations import apply_migrations
from memsvc.storage.postgres.rows import (M_COLUMNS, NEWEST_FIRST, RETURNING, SELECT, aged_clause,
                                          casefold_collation, dump_metadata, filter_clause, row_to_memory,
                                          scope_clause)
from memsvc.storage.postgres.working_set_port import PgWorkingSetPort
from memsvc.storage.sequences import VEC_GENERATION
from memsvc.storage.sqlite_backend import DEFAULT_WORKING_SET_BYTES
from memsvc.working_set import WorkingSets

#: Retrieval counts the memories retention hid up to this many (see count_aged).
AGED_COUNT_CAP = 10_000

DeleteHook = Callable[[psycopg.Connection, list[tuple[str, int]]], None]
#: Runs inside the transaction that wrote memories: (conn, the rows as written, None for a
#: draft that failed), so derived rows (vectors) commit with them.
WriteHook = Callable[[psycopg.Connection, list[Memory | None]], None]

# keep and occurred_at: given, they replace the stored ones; not given (NULL), an insert
# stores false / NULL and an upsert leaves the row's. `xmax = 0` only for a row this
# statement inserted (an updated row version carries the updating transaction's id).
_UPSERT = (
    "INSERT INTO memories AS mem (id, api_key_id, session_id, type, key, content, metadata, created_at, "
    "updated_at, expires_at, keep, occurred_at) VALUES (%(id)s, %(owner)s, %(session)s, %(type)s, %(key)s, "
    "%(content)s, %(metadata)s::jsonb, now(), now(), %(expires)s, coalesce(%(keep)s::boolean, false), "
    "%(occurred)s::timestamptz) "
    "ON CONFLICT (api_key_id, key) WHERE key IS NOT NULL DO UPDATE SET content = excluded.content, "
    "session_id = excluded.session_id, type = excluded.type, expires_at = excluded.expires_at, "
    "metadata = mem.metadata || excluded.metadata, updated_at = excluded.updated_at, "
    "keep = coalesce(%(keep)s::boolean, mem.keep), occurred_at = coalesce(excluded.occurred_at, mem.occurred_at)"
    + RETURNING + ", (mem.xmax = 0)"
)
# None in a patch leaves the column alone; metadata, when given, replaces the whole object.
_UPDATE = (
    "UPDATE memories SET type = coalesce(%s, type), key = coalesce(%s, key), content = coalesce(%s, content), "
    "metadata = coalesce(%s::jsonb, metadata), keep = coalesce(%s::boolean, keep), "
    "occurred_at = coalesce(%s::timestamptz, occurred_at), updated_at = now() WHERE id = %s" + RETURNING
)
_OWNER_KEY_INDEX = "idx_memories_owner_key"


def bump_vec_generation(conn: psycopg.Connection) -> int:
    """Inside a write transaction: advance `vec_generation` (the counter every process's
    vector cache compares against) and return the new value."""
    return int(conn.execute(
        "INSERT INTO sequences (name, value) VALUES (%s, 1) "
        "ON CONFLICT (name) DO UPDATE SET value = sequences.value + 1 RETURNING value", (VEC_GENERATION,)).fetchone()[0])


def _unstorable(exc: psycopg.DataError) -> ValidationError:
    """PostgreSQL's text and jsonb cannot hold a NUL character (SQLite can): a draft that
    holds one is refused as bad input, not failed as a server error."""
    return ValidationError.single("content", f"holds a character the database cannot store ({exc})")


def _duplicate_key(key: str) -> ConflictError:
    return ConflictError(f"another memory of this owner already has the key {shorten(key)!r}",
                         reason="DUPLICATE_KEY", metadata={"key": key})


def _fetch(conn: psycopg.Connection, memory_id: str) -> Memory | None:
    row = conn.execute(SELECT + " WHERE id = %s", (memory_id,)).fetchone()
    return row_to_memory(row) if row else None


class PgMemoryBackend:
    """MemoryBackend over a shared PostgreSQL (see `memsvc.storage.postgres.database`)."""

    name = "postgres"

    def __init__(self, database: PgDatabase, working_set_bytes: int = DEFAULT_WORKING_SET_BYTES) -> None:
        self.db = database
        self._delete_hooks: list[DeleteHook] = []
        self._stats = keyword.stats_cache()
        self._collation: str | None = None
        #: Owner-scoped keyword searches ranked in memory (memsvc.working_set), as on SQLite;
        #: 0 bytes: by PostgreSQL's full-text search.
        self.working_sets = WorkingSets(PgWorkingSetPort(database), working_set_bytes)

    def add_delete_hook(self, hook: DeleteHook) -> None:
        """Run `hook(conn, [(id, memory_id), ...])` inside every transaction that deletes
        memories, so derived rows (vectors) go in the same commit as the memories."""
        self._delete_hooks.append(hook)

    def _delete_where(self, conn: psycopg.Connection, where: str, params: Sequence[Any]) -> int:
        deleted = [(row[0], int(row[1])) for row in
                   conn.execute("DELETE FROM memories" + where + " RETURNING id, memory_id", params).fetchall()]
        for hook in self._delete_hooks:
            hook(conn, deleted)
        return len(deleted)

    def snapshot(self) -> ContextManager[object]:
        """One REPEATABLE READ transaction for everything a request reads on this thread:
        every read inside the block sees the same committed state."""
        return self.db.read()

    # -- lifecycle -----------------------------------------------------------------------

    def initialize(self) -> None:
        """Bring the schema up to date (idempotent; replicas starting together queue on the
        runner's lock); refuses a newer database."""
        apply_migrations(self.db)
        self._collation = casefold_collation(self.db.read)

    def shutdown(self) -> None:
        """Close every connection; the backend is unusable afterwards."""
        self.db.close()

    def health(self) -> dict[str, object]:
        """A cheap probe (`SELECT 1` on a pooled connection); reports, never raises."""
        result: dict[str, object] = {"ok": True, "backend": self.name}
        try:
            with self.db.read() as conn:
                conn.execute("SELECT 1").fetchone()
        except Exception as exc:  # noqa: BLE001 - a probe reports, it does not raise
            result["ok"] = False
            result["error"] = f"{type(exc).__name__}: {exc}"
        return result

    def keyword_probe(self) -> tuple[bool, str]:
        """Runs a real match through the GIN index: the keyword tier's health, measured."""
        try:
            with self.db.read() as conn:
                keyword.probe(conn)
        except Exception as exc:  # noqa: BLE001 - a probe reports, it does not raise
            return False, f"{type(exc).__name__}: {exc}"
        return True, ""

    # -- writes --------------------------------------------------------------------------

    def create(self, memory: NewMemory) -> UpsertResult:
        """Insert, or with a key update the owner's row with that key in place (content,
        session, type, expiry replaced; metadata merged shallowly, new keys winning; keep and
        occurred_at replaced when given, else left as they were)."""
        return self.create_many([memory])[0]

    def create_many(self, memories: Sequence[NewMemory], in_transaction: WriteHook | None = None) -> list[UpsertResult]:
        """`create` for several memories in one transaction: all are stored or none.
        `in_transaction(conn, stored)` runs inside it once the rows are written (`stored[i]`
        is the row drafts[i] left), so derived rows such as their vectors commit with them."""
        with self.db.write() as conn:
            results = [self._create_in(conn, memory) for memory in memories]
            if in_transaction is not None:
                in_transaction(conn, [r.memory for r in results])
            return results

    def create_each(self, memories: Sequence[NewMemory],
                    in_transaction: WriteHook | None = None) -> list[UpsertResult | Exception]:
        """`create` for independent drafts in ONE transaction (one commit for all). A draft
        that fails changes nothing and its slot holds its exception, while the others are
        stored: each draft runs in a savepoint, since a failed statement aborts a whole
        PostgreSQL transaction. A failure of the transaction itself (the connection lost)
        raises: then nothing was stored."""
        outcomes: list[UpsertResult | Exception] = []
        with self.db.write() as conn:
            for memory in memories:
                try:
                    with self.db.savepoint(conn):
                        outcomes.append(self._create_in(conn, memory))
                except (psycopg.Error, ValidationError, ConflictError) as exc:
                    if conn.info.transaction_status != TransactionStatus.INTRANS:
                        raise
                    outcomes.append(exc)
            if in_transaction is not None:
                in_transaction(conn, [o.memory if isinstance(o, UpsertResult) else None for o in outcomes])
        return outcomes

    @staticmethod
    def _create_in(conn: psycopg.Connection, memory: NewMemory) -> UpsertResult:
        params = {"id": str(uuid.uuid4()), "owner": memory.api_key_id, "session": memory.session_id,
                  "type": memory.type, "key": memory.key, "content": memory.content,
                  "metadata": dump_metadata(memory.metadata), "expires": memory.expires_at,
                  "keep": memory.keep, "occurred": memory.occurred_at}
        with _storable():
            row = conn.execute(_UPSERT, params).fetchone()
        stored = row_to_memory(row[:-1])
        return UpsertResult(id=stored.id, created=bool(row[-1]), memory=stored)

    def replace_with_summary(self, ids: Sequence[str], summary: NewMemory) -> tuple[UpsertResult, int]:
        """Create `summary` and delete `ids` in one transaction, so a crash leaves either the
        originals or the summary, never neither. Returns the summary and how many of the ids
        were deleted."""
        with self.db.write() as conn:
            created = self._create_in(conn, summary)
            removed = self._delete_where(conn, " WHERE id = ANY(%s::text[])", (list(ids),))
            return created, removed

    def rewrite_contents(self, contents: dict[str, str]) -> int:
        """Replace the content of several memories in one statement; returns rows changed."""
        if not contents:
            return 0
        with self.db.write() as conn, _storable():
            cur = conn.execute("UPDATE memories m SET content = c.content, updated_at = now() "
                               "FROM unnest(%s::text[], %s::text[]) AS c(id, content) WHERE m.id = c.id",
                               (list(contents), list(contents.values())))
            return cur.rowcount

    def update(self, memory_id: str, patch: MemoryPatch) -> Memory | None:
        """Apply the patch in one statement (None fields untouched; metadata replaces the
        whole object). None when the id does not exist; ConflictError(DUPLICATE_KEY) when
        the new key is already used by another memory of the same owner."""
        params = (patch.type, patch.key, patch.content,
                  None if patch.metadata is None else dump_metadata(patch.metadata),
                  patch.keep, patch.occurred_at, memory_id)
        with self.db.write() as conn, _storable():
            try:
                row = conn.execute(_UPDATE, params).fetchone()
            except pg_errors.UniqueViolation as exc:
                if exc.diag.constraint_name != _OWNER_KEY_INDEX or patch.key is None:
                    raise
                raise _duplicate_key(patch.key) from exc
            return row_to_memory(row) if row else None

    def delete(self, memory_id: str) -> bool:
        with self.db.write() as conn:
            return self._delete_where(conn, " WHERE id = %s", (memory_id,)) > 0

    def clear(self, flt: MemoryFilter) -> int:
        """Delete every memory matching the filter (an empty filter matches all)."""
        where, params = filter_clause(flt, self._collation)
        with self.db.write() as conn:
            return self._delete_where(conn, where, params)

    def touch(self, ids: Sequence[str] | Mapping[str, int]) -> None:
        """Record that these memories were returned: access_count + n (n = how often each id
        was returned; 1 for a plain list), last_accessed_at = now, in one transaction.
        Unknown ids are ignored. The rows are locked in id order, so two replicas touching
        overlapping sets never deadlock."""
        counts = dict(ids) if isinstance(ids, Mapping) else dict(Counter(ids))
        if not counts:
            return
        ordered = sorted(counts)
        with self.db.write() as conn:
            conn.execute("UPDATE memories m SET access_count = m.access_count + t.n, last_accessed_at = now() "
                         "FROM (SELECT u.id, u.n FROM memories x JOIN unnest(%s::text[], %s::bigint[]) AS u(id, n) "
                         "ON x.id = u.id ORDER BY x.id FOR UPDATE OF x) AS t WHERE m.id = t.id",
                         (ordered, [counts[i] for i in ordered]))

    def mark_all_for_reindex(self) -> int:
        """Reindex `force`: every memory needs a new vector."""
        with self.db.write() as conn:
            changed = conn.execute("UPDATE memories SET needs_reindex = true WHERE NOT needs_reindex").rowcount
            # Vector caches remember which owners had nothing pending: this voids that.
            bump_vec_generation(conn)
            return changed

    # -- reads ---------------------------------------------------------------------------

    def get(self, memory_id: str) -> Memory | None:
        with self.db.read() as conn:
            return _fetch(conn, memory_id)

    def get_many(self, ids: Sequence[str]) -> dict[str, Memory]:
        """The memories that exist among `ids`, by id."""
        if not ids:
            return {}
        with self.db.read() as conn:
            rows = conn.execute(SELECT + " WHERE id = ANY(%s::text[])", (list(ids),)).fetchall()
        return {m.id: m for m in map(row_to_memory, rows)}

    def page_by_memory_id(self, offset: int, limit: int) -> list[Memory]:
        """Every memory in memory_id order, one page (Reindex's vector backfill)."""
        with self.db.read() as conn:
            rows = conn.execute(SELECT + " ORDER BY memory_id LIMIT %s OFFSET %s", (limit, offset)).fetchall()
        return [row_to_memory(r) for r in rows]

    def older_than(self, api_key_id: str | None, cutoff: datetime, session_id: str | None = None,
                   *, include_kept: bool = True) -> list[Memory]:
        """Memories created before `cutoff`, oldest first (summarization candidates).
        `include_kept=False` leaves out memories stored with `keep`: they have no age limit,
        so folding old memories into a summary must never delete them."""
        clauses, params = ["created_at < %s"], [cutoff]
        if not include_kept:
            clauses.append("NOT keep")
        if api_key_id is not None:
            clauses.append("api_key_id = %s")
            params.append(api_key_id)
        if session_id is not None:
            clauses.append("session_id = %s")
            params.append(session_id)
        with self.db.read() as conn:
            rows = conn.execute(SELECT + " WHERE " + " AND ".join(clauses) + " ORDER BY created_at, memory_id",
                                params).fetchall()
        return [row_to_memory(r) for r in rows]

    def list(self, flt: MemoryFilter, limit: int, offset: int) -> MemoryPage:
        """One page, newest first (created_at, then memory_id, descending), plus total,
        per-type counts and Σ ceil(chars/4) over the whole filtered set (SQLite's
        `(length(content) + 3) / 4`, in characters), all from one snapshot. `by_type`
        always has the four types (0 when absent)."""
        if limit < 0 or offset < 0:
            raise ValueError("limit and offset must be >= 0")
        where, params = filter_clause(flt, self._collation)
        with self.db.read() as conn:
            rows = conn.execute(SELECT + where + NEWEST_FIRST + " LIMIT %s OFFSET %s",
                                [*params, limit, offset]).fetchall()
            groups = conn.execute("SELECT type, count(*), sum((char_length(content) + 3) / 4) FROM memories"
                                  + where + " GROUP BY type", params).fetchall()
        by_type = dict.fromkeys(MEMORY_TYPES, 0)
        by_type.update({t: int(n) for t, n, _ in groups})
        return MemoryPage(data=[row_to_memory(r) for r in rows], total=sum(int(n) for _, n, _ in groups),
                          by_type=by_type, tokens_used=sum(int(tokens or 0) for _, _, tokens in groups))

    # -- retrieval (SearchBackend) ---------------------------------------------------------

    # Retrieval's other reads come from the owner's working set as on SQLite (one change
    # number read per snapshot for all of them); across owners, or for an owner the budget
    # cannot hold, from the store.

    def recent(self, scope: SearchScope, limit: int) -> list[Memory]:
        """Newest first within the retrieval scope."""
        where, params = scope_clause(scope)
        with self.db.read() as conn:
            found = self.working_sets.answer(conn, scope, lambda owner_set: owner_set.recent(scope, limit))
            if found is not None:
                return found
            rows = conn.execute(f"SELECT {M_COLUMNS} FROM memories m WHERE {where}"
                                " ORDER BY m.created_at DESC, m.memory_id DESC LIMIT %s", [*params, limit]).fetchall()
        return [row_to_memory(r) for r in rows]

    def count_aged(self, scope: SearchScope) -> int:
        """How many memories the scope hides for their age alone (0 without an age limit),
        counted up to AGED_COUNT_CAP: an owner with a million old rows must not pay for
        counting them all on every retrieval."""
        found = aged_clause(scope)
        if found is None:
            return 0
        where, params = found
        with self.db.read() as conn:
            counted = self.working_sets.answer(conn, scope, lambda owner_set: owner_set.count_aged(scope, AGED_COUNT_CAP))
            if counted is not None:
                return counted
            return int(conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM memories m WHERE {where} LIMIT %s) AS a",
                                    [*params, AGED_COUNT_CAP]).fetchone()[0])

    def search_keyword(self, scope: SearchScope, text: str, limit: int) -> list[KeywordHit]:
        """Best keyword matches of `text` within the scope: an owner's from its working set
        (memsvc.working_set: FTS5's tokens and BM25, the SQLite store's ranking), kept current
        through the per-owner change log in this snapshot; across owners, or for an owner the
        budget cannot hold, by full-text search (memsvc.storage.postgres.keyword)."""
        with self.db.read() as conn:
            hits = self.working_sets.search_keyword(conn, scope, text, limit)
            if hits is not None:
                return hits
            return keyword.search(conn, scope, text, limit, self._stats)

    def happened_within(self, scope: SearchScope, windows: Sequence[TimeWindow], limit: int) -> list[Memory]:
        """Memories of the scope that happened inside the windows (see postgres.timeline)."""
        if not windows:
            return []
        with self.db.read() as conn:
            found = self.working_sets.answer(conn, scope, lambda s: s.happened_within(scope, windows, limit))
            return found if found is not None else timeline.happened_within(conn, scope, windows, limit)

    def neighbours(self, scope: SearchScope, memories: Sequence[Memory]) -> dict[str, list[Memory]]:
        """Each memory's neighbours in its session (see postgres.timeline)."""
        if not memories:
            return {}
        with self.db.read() as conn:
            found = self.working_sets.answer(conn, scope, lambda owner_set: owner_set.neighbours(scope, memories))
            return found if found is not None else timeline.neighbours(conn, scope, memories)


@contextmanager
def _storable() -> Iterator[None]:
    """A value PostgreSQL cannot hold (a NUL character) as a ValidationError."""
    try:
        yield
    except psycopg.DataError as exc:
        raise _unstorable(exc) from exc
