"""The SQLite MemoryBackend: the embedded default primary store.

Every statement binds user values through placeholders; the only text ever joined into SQL
is the fixed fragments of `_where`. The FTS5 index follows the rows through the triggers of
migration 0001, so this module never writes to memory_fts itself.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Callable, ContextManager, Mapping

import apsw

from memsvc.kernel.errors import ConflictError, shorten
from memsvc.kernel.inline import may_block
from memsvc.kernel.time_phrases import TimeWindow
from memsvc.kernel.models import (
    MEMORY_TYPES,
    KeywordHit,
    Memory,
    MemoryFilter,
    MemoryPage,
    MemoryPatch,
    NewMemory,
    SearchScope,
    UpsertResult,
    utcnow,
)
from memsvc.storage import keyword, timeline
from memsvc.storage.database import CASEFOLD_FUNCTION, Database, as_domain_error, iso, parse_iso
from memsvc.storage.memory_rows import (COLUMNS, M_COLUMNS, NEWEST_FIRST, RETURNING, SELECT, dump_metadata,
                                         row_to_memory)
from memsvc.storage.migrations import apply_migrations
from memsvc.storage.sequences import bump_vec_generation
from memsvc.storage.working_set_port import SqliteWorkingSetPort
from memsvc.working_set import WorkingSets

#: The working sets' memory budget when the caller names none (MEMSVC_WORKING_SET_MB).
DEFAULT_WORKING_SET_BYTES = 256_000_000
#: Retrieval counts the memories retention hid up to this many (see count_aged).
AGED_COUNT_CAP = 10_000

DeleteHook = Callable[[apsw.Connection, list[tuple[str, int]]], None]
#: Runs inside the transaction that wrote memories: (conn, the rows as written, None for a
#: draft that failed), so derived rows (vectors) commit with them.
WriteHook = Callable[[apsw.Connection, list[Memory | None]], None]


# memory_id is computed in the INSERT itself, inside the write transaction that holds the
# database's write lock, so two inserts can never pick the same value.
_INSERT = (
    "INSERT INTO memories (id, memory_id, api_key_id, session_id, type, key, content, "
    "metadata, created_at, updated_at, expires_at, keep, occurred_at) "
    "VALUES (?, (SELECT value + 1 FROM sequences WHERE name = 'memory_id'), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

# Case-insensitive substring on content or key. instr() has no wildcards, so "%" and "_" in
# q are literal without any escaping; the registered casefold function folds all of
# Unicode (SQLite's lower()/LIKE fold only ASCII).
_Q_CLAUSE = (
    f"(instr({CASEFOLD_FUNCTION}(content), ?) > 0 "
    f"OR instr({CASEFOLD_FUNCTION}(COALESCE(key, '')), ?) > 0)"
)


def _where(flt: MemoryFilter) -> tuple[str, list[Any]]:
    """WHERE clause for a filter: fixed fragments joined, every value a bound parameter."""
    clauses: list[str] = []
    params: list[Any] = []
    if flt.api_key_id is not None:
        clauses.append("api_key_id = ?")
        params.append(flt.api_key_id)
    if flt.owners is not None:
        clauses.append("api_key_id IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(sorted(flt.owners)))
    if flt.session_id is not None:
        clauses.append("session_id = ?")
        params.append(flt.session_id)
    if flt.type is not None:
        clauses.append("type = ?")
        params.append(flt.type)
    if flt.q:
        folded = flt.q.casefold()
        clauses.append(_Q_CLAUSE)
        params.extend([folded, folded])
    if flt.created_before is not None:
        clauses.append("created_at < ?")
        params.append(iso(flt.created_before))
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _fetch(conn: apsw.Connection, memory_id: str) -> Memory | None:
    rows = conn.execute(SELECT + " WHERE id = ?", (memory_id,)).fetchall()
    return row_to_memory(rows[0]) if rows else None


class SqliteMemoryBackend:
    """MemoryBackend over one SQLite file (see `memsvc.storage.database.Database`)."""

    name = "sqlite"

    def __init__(self, db: Database, working_set_bytes: int = DEFAULT_WORKING_SET_BYTES) -> None:
        self.db = db
        self._delete_hooks: list[DeleteHook] = []
        self._doc_counts = keyword.doc_counts()
        #: Owner-scoped keyword searches ranked in memory (memsvc.working_set); 0 bytes: in FTS5.
        self.working_sets = WorkingSets(SqliteWorkingSetPort(), working_set_bytes)

    def add_delete_hook(self, hook: "DeleteHook") -> None:
        """Run `hook(conn, [(id, memory_id), ...])` inside every transaction that deletes
        memories, so derived rows (vectors) go in the same commit as the memories."""
        self._delete_hooks.append(hook)

    def _delete_where(self, conn: apsw.Connection, where: str, params: Sequence[Any]) -> int:
        deleted = [(row[0], int(row[1])) for row in
                   conn.execute("DELETE FROM memories" + where + " RETURNING id, memory_id", params).fetchall()]
        for hook in self._delete_hooks:
            hook(conn, deleted)
        return len(deleted)

    def snapshot(self) -> ContextManager[object]:
        """One read transaction for everything a request reads on this thread: every read
        inside the block (settings, vector state, vectors, keyword hits) sees the same
        committed state, and the block costs one BEGIN instead of one per read."""
        return self.db.read()

    # -- lifecycle -----------------------------------------------------------------------

    def initialize(self) -> None:
        """Bring the schema up to date (idempotent); refuses a newer database."""
        apply_migrations(self.db)

    def shutdown(self) -> None:
        """Close every connection; the backend is unusable afterwards."""
        self.db.close()

    def health(self) -> dict[str, object]:
        """A cheap probe (`SELECT 1` on a reader). `integrity` is the last full check run in
        this process, or "unchecked": the full check reads the whole file and is too slow
        for a probe."""
        result: dict[str, object] = {
            "ok": True,
            "backend": self.name,
            "vec_version": self.db.vec_version,
            "vec_error": self.db.vec_error,
            "integrity": self.db.last_integrity_check or "unchecked",
        }
        try:
            with self.db.read() as conn:
                conn.execute("SELECT 1").fetchall()
            result["free_bytes"] = self.db.free_bytes()
        except Exception as exc:  # noqa: BLE001 - a probe reports, it does not raise
            result["ok"] = False
            result["error"] = f"{type(exc).__name__}: {exc}"
        return result

    # -- writes --------------------------------------------------------------------------

    def create(self, memory: NewMemory) -> UpsertResult:
        """Insert, or with a key update the owner's row with that key in place (content,
        session, type, expiry replaced; metadata merged shallowly, new keys winning; keep and
        occurred_at replaced when given, else left as they were), so repeating the same fact
        never grows the table."""
        return self.create_many([memory])[0]

    def create_many(self, memories: Sequence[NewMemory], in_transaction: WriteHook | None = None) -> list[UpsertResult]:
        """`create` for several memories in one transaction: all are stored or none.
        `in_transaction(conn, stored)` runs inside that transaction once the rows are written
        (`stored[i]` is the row drafts[i] left), so derived rows such as their vectors commit
        with them."""
        now = iso(utcnow())
        with self.db.write() as conn:
            results = [self._create_in(conn, memory, now) for memory in memories]
            if in_transaction is not None:
                in_transaction(conn, [r.memory for r in results])
            return results

    def create_each(self, memories: Sequence[NewMemory],
                    in_transaction: WriteHook | None = None) -> list[UpsertResult | Exception]:
        """`create` for independent drafts in ONE transaction (one commit for all: the group
        commit of concurrent creates). A draft that fails changes nothing and its slot holds
        its exception, while the others are stored. `in_transaction` as in `create_many`
        (None in `stored` for a failed draft). A failure of the transaction itself (the
        commit, or an error after which SQLite rolled everything back) raises: then nothing
        was stored.

        No savepoint per draft: a draft's only write is one statement (`_create_in`), and
        SQLite undoes a failed statement alone, triggers included, leaving the transaction
        open. (A savepoint around each draft costs about a fifth of the batch: every page
        then changed is copied to the savepoint's journal.)"""
        now = iso(utcnow())
        outcomes: list[UpsertResult | Exception] = []
        with self.db.write() as conn:
            for memory in memories:
                try:
                    outcomes.append(self._create_in(conn, memory, now))
                except apsw.Error as exc:
                    if not conn.in_transaction:  # I/O error, disk full, interrupt: all is undone
                        raise
                    outcomes.append(as_domain_error(exc))
            if in_transaction is not None:
                in_transaction(conn, [o.memory if isinstance(o, UpsertResult) else None for o in outcomes])
        return outcomes

    def _create_in(self, conn: apsw.Connection, memory: NewMemory, now: str | None) -> UpsertResult:
        # Exactly one statement writes (the INSERT or the UPDATE), so a draft that fails
        # leaves nothing behind (create_each relies on it).
        if memory.key is not None:
            rows = conn.execute(
                "SELECT id, metadata FROM memories WHERE api_key_id = ? AND key = ?",
                (memory.api_key_id, memory.key),
            ).fetchall()
            if rows:
                stored = self._upsert_in_place(conn, rows[0][0], rows[0][1], memory, now)
                return UpsertResult(id=stored.id, created=False, memory=stored)
        row = conn.execute(
            _INSERT + RETURNING,
            (str(uuid.uuid4()), memory.api_key_id, memory.session_id, memory.type, memory.key,
             memory.content, dump_metadata(memory.metadata), now, now, iso(memory.expires_at),
             int(bool(memory.keep)), iso(memory.occurred_at)),
        ).fetchall()[0]
        stored = row_to_memory(row)
        return UpsertResult(id=stored.id, created=True, memory=stored)

    def replace_with_summary(self, ids: Sequence[str], summary: NewMemory) -> tuple[UpsertResult, int]:
        """Create `summary` and delete `ids` in one transaction, so a crash leaves either
        the originals or the summary, never neither. Returns the summary and how many of
        the ids were deleted."""
        now = iso(utcnow())
        with self.db.write() as conn:
            created = self._create_in(conn, summary, now)
            removed = self._delete_where(conn, " WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(list(ids)),))
            return created, removed

    def rewrite_contents(self, contents: dict[str, str]) -> int:
        """Replace the content of several memories in one transaction; returns rows changed."""
        changed = 0
        now = iso(utcnow())
        with self.db.write() as conn:
            for memory_id, content in contents.items():
                conn.execute("UPDATE memories SET content = ?, updated_at = ? WHERE id = ?", (content, now, memory_id))
                changed += conn.changes()
        return changed

    @staticmethod
    def _upsert_in_place(conn: apsw.Connection, row_id: str, stored: str | None,
                         memory: NewMemory, now: str | None) -> Memory:
        merged = {**(json.loads(stored) if stored else {}), **memory.metadata}
        row = conn.execute(
            "UPDATE memories SET content = ?, session_id = ?, type = ?, expires_at = ?, "
            "metadata = ?, updated_at = ?, keep = COALESCE(?, keep), occurred_at = COALESCE(?, occurred_at) "
            "WHERE id = ?" + RETURNING,
            (memory.content, memory.session_id, memory.type, iso(memory.expires_at),
             dump_metadata(merged), now, None if memory.keep is None else int(memory.keep),
             iso(memory.occurred_at), row_id),
        ).fetchall()[0]
        return row_to_memory(row)

    def update(self, memory_id: str, patch: MemoryPatch) -> Memory | None:
        """Apply the patch (None fields untouched; metadata replaces the whole object).
        None when the id does not exist; ConflictError(DUPLICATE_KEY) when the new key is
        already used by another memory of the same owner."""
        with self.db.write() as conn:
            current = _fetch(conn, memory_id)
            if current is None:
                return None
            if patch.key is not None and patch.key != current.key:
                self._ensure_key_free(conn, current.api_key_id, patch.key, memory_id)
            conn.execute(
                "UPDATE memories SET type = ?, key = ?, content = ?, metadata = ?, updated_at = ?, keep = ?, "
                "occurred_at = ? WHERE id = ?",
                (
                    patch.type if patch.type is not None else current.type,
                    patch.key if patch.key is not None else current.key,
                    patch.content if patch.content is not None else current.content,
                    dump_metadata(patch.metadata if patch.metadata is not None else current.metadata),
                    iso(utcnow()),
                    int(patch.keep if patch.keep is not None else current.keep),
                    iso(patch.occurred_at or current.occurred_at),
                    memory_id,
                ),
            )
            return _fetch(conn, memory_id)

    @staticmethod
    def _ensure_key_free(conn: apsw.Connection, api_key_id: str, key: str, memory_id: str) -> None:
        # Checked inside the write transaction, so no other writer can take the key between
        # this check and the UPDATE; the unique index stays the last line of defence.
        taken = conn.execute(
            "SELECT 1 FROM memories WHERE api_key_id = ? AND key = ? AND id <> ?",
            (api_key_id, key, memory_id),
        ).fetchall()
        if taken:
            raise ConflictError(
                f"another memory of this owner already has the key {shorten(key)!r}",
                reason="DUPLICATE_KEY",
                metadata={"key": key},
            )

    def delete(self, memory_id: str) -> bool:
        with self.db.write() as conn:
            return self._delete_where(conn, " WHERE id = ?", (memory_id,)) > 0

    def clear(self, flt: MemoryFilter) -> int:
        """Delete every memory matching the filter (an empty filter matches all); the
        delete trigger removes their FTS rows."""
        where, params = _where(flt)
        with self.db.write() as conn:
            return self._delete_where(conn, where, params)

    def touch(self, ids: Sequence[str] | Mapping[str, int]) -> None:
        """Record that these memories were returned: access_count + n (n = how often each
        id was returned; 1 for a plain list), last_accessed_at = now, in one transaction.
        Leaves the FTS index alone (its update trigger only fires on content/key changes).
        Unknown ids are ignored."""
        counts = dict(ids) if isinstance(ids, Mapping) else dict(Counter(ids))
        if not counts:
            return
        now = iso(utcnow())
        # One indexed point update per id: the single UPDATE with a correlated json_each
        # lookup per row was quadratic in the batch (the coalesced flush of a second of
        # retrievals cost more CPU than the retrievals themselves).
        with self.db.write() as conn:
            conn.executemany("UPDATE memories SET access_count = access_count + ?, last_accessed_at = ? WHERE id = ?",
                             [(n, now, memory_id) for memory_id, n in counts.items()])

    # -- reads ---------------------------------------------------------------------------

    def get(self, memory_id: str) -> Memory | None:
        with self.db.read() as conn:
            return _fetch(conn, memory_id)

    def get_many(self, ids: Sequence[str]) -> dict[str, Memory]:
        """The memories that exist among `ids`, by id."""
        if not ids:
            return {}
        with self.db.read() as conn:
            rows = conn.execute(SELECT + " WHERE id IN (SELECT value FROM json_each(?))",
                                (json.dumps(list(ids)),)).fetchall()
        return {m.id: m for m in map(row_to_memory, rows)}

    def page_by_memory_id(self, offset: int, limit: int) -> list[Memory]:
        """Every memory in memory_id order, one page (Reindex's Qdrant backfill)."""
        with self.db.read() as conn:
            rows = conn.execute(SELECT + " ORDER BY memory_id LIMIT ? OFFSET ?", (limit, offset)).fetchall()
        return [row_to_memory(r) for r in rows]

    def mark_all_for_reindex(self) -> int:
        """Reindex `force`: every memory needs a new vector."""
        with self.db.write() as conn:
            conn.execute("UPDATE memories SET needs_reindex = 1 WHERE needs_reindex = 0")
            changed = conn.changes()
            # Vector caches remember which owners had nothing pending: this voids that.
            bump_vec_generation(conn)
            return changed

    def keyword_probe(self) -> tuple[bool, str]:
        """Runs a real MATCH on both FTS5 indexes: the keyword tier's health, measured."""
        try:
            with self.db.read() as conn:
                conn.execute("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH '\"memsvc_probe\"'").fetchall()
                conn.execute("SELECT count(*) FROM memory_fts_cjk WHERE memory_fts_cjk MATCH '\"探测器\"'").fetchall()
        except Exception as exc:  # noqa: BLE001 - a probe reports, it does not raise
            return False, f"{type(exc).__name__}: {exc}"
        return True, ""

    def recent(self, scope: SearchScope, limit: int) -> list[Memory]:
        """Newest first within the retrieval scope (an owner's from its working set)."""
        with self.db.read() as conn:
            found = self.working_sets.answer(conn, scope, lambda owner_set: owner_set.recent(scope, limit))
            if found is not None:
                return found
            where, params = keyword.scope_clause(scope)
            rows = conn.execute(f"SELECT {M_COLUMNS} FROM memories m WHERE {where}"
                                " ORDER BY m.created_at DESC, m.memory_id DESC LIMIT ?", [*params, limit]).fetchall()
        return [row_to_memory(r) for r in rows]

    def count_aged(self, scope: SearchScope) -> int:
        """How many memories the scope hides for their age alone (0 without an age limit),
        counted up to AGED_COUNT_CAP: a range of the owner's (api_key_id, created_at) index,
        which every retrieval reads, so an owner with a million old rows must not pay for
        counting them all."""
        found = keyword.aged_clause(scope)
        if found is None:
            return 0
        where, params = found
        with self.db.read() as conn:
            counted = self.working_sets.answer(conn, scope, lambda owner_set: owner_set.count_aged(scope, AGED_COUNT_CAP))
            if counted is not None:
                return counted
            return int(conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM memories m WHERE {where} LIMIT ?)",
                                    [*params, AGED_COUNT_CAP]).fetchone()[0])

    def search_keyword(self, scope: SearchScope, text: str, limit: int) -> list[KeywordHit]:
        """Best keyword matches of `text` within the scope: an owner's from its working set
        (memsvc.working_set), kept current through the change sequence in this snapshot;
        across owners, or for an owner the budget cannot hold, from FTS5
        (memsvc.storage.keyword)."""
        with self.db.read() as conn:
            hits = self.working_sets.search_keyword(conn, scope, text, limit)
            if hits is not None:
                return hits
            may_block("a keyword search in the store")
            return keyword.search(conn, M_COLUMNS, scope, text, limit, row_to_memory, self._doc_counts)

    def happened_within(self, scope: SearchScope, windows: Sequence[TimeWindow], limit: int) -> list[Memory]:
        """Memories of the scope that happened inside the windows (an owner's from its working
        set; see memsvc.storage.timeline)."""
        with self.db.read() as conn:
            found = self.working_sets.answer(conn, scope, lambda s: s.happened_within(scope, windows, limit))
            return found if found is not None else timeline.happened_within(conn, scope, windows, limit)

    def neighbours(self, scope: SearchScope, memories: Sequence[Memory]) -> dict[str, list[Memory]]:
        """Each memory's neighbours in its session (an owner's from its working set; see
        memsvc.storage.timeline)."""
        if not memories:
            return {}
        with self.db.read() as conn:
            found = self.working_sets.answer(conn, scope, lambda owner_set: owner_set.neighbours(scope, memories))
            return found if found is not None else timeline.neighbours(conn, scope, memories)

    def older_than(self, api_key_id: str | None, cutoff: datetime, session_id: str | None = None,
                   *, include_kept: bool = True) -> list[Memory]:
        """Memories created before `cutoff`, oldest first (summarization candidates).
        `include_kept=False` leaves out memories stored with `keep`: they have no age limit,
        so folding old memories into a summary must never delete them."""
        clauses, params = ["created_at < ?"], [iso(cutoff)]
        if not include_kept:
            clauses.append("keep = 0")
        if api_key_id is not None:
            clauses.append("api_key_id = ?")
            params.append(api_key_id)
        if session_id is not None:
            clauses.append("session_id = ?")
            params.append(session_id)
        with self.db.read() as conn:
            rows = conn.execute(SELECT + " WHERE " + " AND ".join(clauses) + " ORDER BY created_at, memory_id",
                                params).fetchall()
        return [row_to_memory(r) for r in rows]

    def list(self, flt: MemoryFilter, limit: int, offset: int) -> MemoryPage:
        """One page, newest first (created_at, then memory_id, descending), plus total,
        per-type counts and Σ ceil(len/4) over the whole filtered set, all read from the
        same snapshot. `by_type` always has the four types (0 when absent)."""
        if limit < 0 or offset < 0:
            raise ValueError("limit and offset must be >= 0")
        where, params = _where(flt)
        with self.db.read() as conn:
            rows = conn.execute(
                SELECT + where + NEWEST_FIRST + " LIMIT ? OFFSET ?", [*params, limit, offset]
            ).fetchall()
            groups = conn.execute(
                "SELECT type, count(*), sum((length(content) + 3) / 4) FROM memories"
                + where + " GROUP BY type",
                params,
            ).fetchall()
        by_type = {t: 0 for t in MEMORY_TYPES}
        by_type.update({t: int(n) for t, n, _ in groups})
        return MemoryPage(
            data=[row_to_memory(r) for r in rows],
            total=sum(int(n) for _, n, _ in groups),
            by_type=by_type,
            tokens_used=sum(int(tokens or 0) for _, _, tokens in groups),
        )
