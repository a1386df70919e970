"""The memory store: the one MemoryBackend implementation, on SQLite or PostgreSQL.

Why one class: the two databases answer the same contract (tests/contract/), so the Python
that speaks it is written once over the seam of `memsvc.storage.dialect`; a database keeps
only what truly differs (its connections, its dialect, its migrations). Every statement
binds user values as parameters; the only text joined into SQL is fixed fragments.

Why the statements are shaped as they are: on PostgreSQL other processes write the same
rows at the same time under READ COMMITTED, so every rule that must hold across processes is
one statement (the keyed upsert is one INSERT … ON CONFLICT there; an update is one
`UPDATE … SET col = coalesce(new, col)`; the key check of an update is the unique index).
SQLite has one writer per file, behind its write lock.
"""

from __future__ import annotations

import builtins
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime
from typing import Any

from memsvc.kernel.changes import (
    EXPIRED,
    MERGED,
    SUMMARIZED,
    UPSERT,
    ChangeCause,
    FeedPage,
    MemoryChange,
    current_cause,
)
from memsvc.kernel.errors import ConflictError, ValidationError
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
)
from memsvc.kernel.time_phrases import TimeWindow
from memsvc.storage.dialect import Dialect, aged_clause, refuse_nul, refuse_nul_in, scope_clause
from memsvc.storage.lifecycle import Lifecycle
from memsvc.storage.memory_rows import M_COLUMNS, NEWEST_FIRST, RETURNING, SELECT, dump_metadata
from memsvc.storage.sequences import bump_vec_generation
from memsvc.storage.transactions import Transactions
from memsvc.working_set import WorkingSets
from memsvc.working_set.past import PastView

#: The working sets' memory budget when the caller names none (MEMSVC_WORKING_SET_MB).
DEFAULT_WORKING_SET_BYTES = 256_000_000
#: Retrieval counts the memories retention hid up to this many (see count_aged).
AGED_COUNT_CAP = 10_000

#: Runs inside every transaction that deletes memories: (conn, [(id, memory_id), ...]).
DeleteHook = Callable[[Any, list[tuple[str, int]]], None]
#: Runs inside the transaction that wrote memories: (conn, the rows as written, None for a
#: draft that failed), so derived rows (vectors) commit with them.
WriteHook = Callable[[Any, list[Memory | None]], None]

# None in a patch leaves the column alone; metadata, when given, replaces the whole object.
_UPDATE = (
    "UPDATE memories SET type = coalesce(?, type), key = coalesce(?, key), content = coalesce(?, content), "
    "metadata = coalesce({json}, metadata), keep = coalesce({bool}, keep), "
    "occurred_at = coalesce({ts}, occurred_at), updated_at = {now} WHERE id = ?" + RETURNING
)
_OLDER_THAN = SELECT + " WHERE {where} ORDER BY created_at, memory_id"
_COUNT_AGED = "SELECT count(*) FROM (SELECT 1 FROM memories m WHERE {where} LIMIT ?) AS a"
_RECENT = f"SELECT {M_COLUMNS} FROM memories m WHERE {{where}} ORDER BY m.created_at DESC, m.memory_id DESC LIMIT ?"
_GROUPS = "SELECT type, count(*), sum(({length}(content) + 3) / 4) FROM memories"
# A duplicate's write: the memory it repeats is kept as it is, and only its updatedAt moves
# (the history trigger records the duplicate's text as a merge). Owner-checked: a merge
# target is never another owner's memory.
_MERGE = "UPDATE memories SET updated_at = {now} WHERE id = ? AND api_key_id = ?" + RETURNING
_DUE = "SELECT id FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY expires_at LIMIT ?"


def _resolved(draft: NewMemory, earlier: Sequence[UpsertResult | Exception]) -> NewMemory:
    """A draft that repeats an earlier draft of the same write (`NewMemory.repeats`) merges
    into the memory that draft became; when that draft failed, it is stored itself."""
    if draft.repeats is None:
        return draft
    target = earlier[draft.repeats]
    return replace(draft, merge_into=target.id if isinstance(target, UpsertResult) else None, repeats=None)


class SqlMemoryBackend:
    """MemoryBackend over one database (`memsvc.storage.database.Database` or
    `memsvc.storage.postgres.database.PgDatabase`) through its dialect."""

    def __init__(self, db: Transactions, dialect: Dialect, working_set_bytes: int = DEFAULT_WORKING_SET_BYTES) -> None:
        self.db = db
        self.dialect = dialect
        self.name = dialect.name
        self._sql = dialect.syntax.sql
        self._delete_hooks: list[DeleteHook] = []
        self.lifecycle = Lifecycle(dialect.syntax, dialect.feed, dialect.row_to_memory)
        self._keyword_cache = dialect.keyword_cache()
        self._collation: str | None = None
        #: Owner-scoped searches answered in memory (memsvc.working_set); 0 bytes: by the store.
        self.working_sets = WorkingSets(dialect.working_set_port(db), working_set_bytes)

    def add_delete_hook(self, hook: DeleteHook) -> None:
        """Run `hook(conn, [(id, memory_id), ...])` inside every transaction that deletes
        memories, so derived rows (vectors) go in the same commit as the memories."""
        self._delete_hooks.append(hook)

    def _delete_where(
        self, conn: Any, where: str, params: Sequence[Any], now: str | None, cause: ChangeCause | None = None
    ) -> list[Memory]:
        """Delete, forget what the deletion's cause says (memsvc.storage.lifecycle) and let the
        derived rows follow, all in `conn`'s transaction."""
        rows = conn.execute("DELETE FROM memories" + where + RETURNING, params).fetchall()
        deleted = self._memories(rows)
        self.lifecycle.deleted(conn, deleted, cause or current_cause(), now)
        for hook in self._delete_hooks:
            hook(conn, [(m.id, m.memory_id) for m in deleted])
        return deleted

    def snapshot(self) -> AbstractContextManager[object]:
        """One read transaction for everything a request reads on this thread: every read
        inside the block (settings, vector state, vectors, keyword hits) sees the same
        committed state, and the block costs one BEGIN instead of one per read."""
        return self.db.read()

    # -- lifecycle -----------------------------------------------------------------------

    def initialize(self) -> None:
        """Bring the schema up to date (idempotent; replicas starting together queue on the
        runner's lock); refuses a newer database."""
        self._collation = self.dialect.initialize(self.db)

    def shutdown(self) -> None:
        """Close every connection; the backend is unusable afterwards."""
        self.db.close()

    def health(self) -> dict[str, object]:
        """A cheap probe (`SELECT 1`); reports, never raises. On SQLite `integrity` is the
        last full check run in this process (the full check is too slow for a probe)."""
        result: dict[str, object] = {"ok": True, "backend": self.name, **self.dialect.health_facts(self.db)}
        try:
            with self.db.read() as conn:
                conn.execute("SELECT 1").fetchall()
            result.update(self.dialect.health_measures(self.db))
        except Exception as exc:  # noqa: BLE001 - a probe reports, it does not raise
            result["ok"] = False
            result["error"] = f"{type(exc).__name__}: {exc}"
        return result

    def keyword_probe(self) -> tuple[bool, str]:
        """Runs a real match through the keyword index: the keyword tier's health, measured."""
        try:
            with self.db.read() as conn:
                self.dialect.keyword_probe(conn)
        except Exception as exc:  # noqa: BLE001 - a probe reports, it does not raise
            return False, f"{type(exc).__name__}: {exc}"
        return True, ""

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
        now = self.dialect.clock()
        with self.db.write() as conn:
            results: list[UpsertResult] = []
            for memory in memories:
                results.append(self._create_in(conn, _resolved(memory, results), now))
            if in_transaction is not None:
                in_transaction(conn, [None if r.merged else r.memory for r in results])
            return results

    def create_each(
        self, memories: Sequence[NewMemory], in_transaction: WriteHook | None = None
    ) -> list[UpsertResult | Exception]:
        """`create` for independent drafts in ONE transaction (one commit for all: the group
        commit of concurrent creates). A draft that fails changes nothing and its slot holds
        its exception, while the others are stored (`Dialect.draft`). `in_transaction` as in
        `create_many` (None for a failed draft). A failure of the transaction itself raises:
        then nothing was stored."""
        now, dialect = self.dialect.clock(), self.dialect
        outcomes: list[UpsertResult | Exception] = []
        with self.db.write() as conn:
            for memory in memories:
                try:
                    with dialect.draft(self.db, conn):
                        outcomes.append(self._create_in(conn, _resolved(memory, outcomes), now))
                except (self.db.driver_error, ValidationError, ConflictError) as exc:
                    if not dialect.in_transaction(conn):  # I/O error, disk full, lost: all is undone
                        raise
                    outcomes.append(self.db.domain_error(exc))
            if in_transaction is not None:
                in_transaction(
                    conn, [o.memory if isinstance(o, UpsertResult) and not o.merged else None for o in outcomes]
                )
        return outcomes

    def _create_in(self, conn: Any, memory: NewMemory, now: str | None) -> UpsertResult:
        """Exactly one statement writes, so a draft that fails leaves nothing behind. The
        draft's author (several callers' drafts share a transaction) and kind (a keyed create
        may supersede a fact; a duplicate merges) go to the history with it."""
        refuse_nul(memory)
        cause = replace(current_cause(), author=memory.author or current_cause().author)
        if memory.merge_into is not None:
            with self.dialect.bind_cause(conn, replace(cause, reason=MERGED, detail=memory.content), now):
                merged = self._merge(conn, memory, now)
            if merged is not None:
                return merged
        with self.dialect.bind_cause(conn, replace(cause, reason=UPSERT if memory.key else ""), now):
            return self.dialect.upsert(conn, memory, now)

    def _merge(self, conn: Any, memory: NewMemory, now: str | None) -> UpsertResult | None:
        """Touch the memory a duplicate repeats; None when it is gone (then the draft is stored)."""
        params = [*([now] if now is not None else []), memory.merge_into, memory.api_key_id]
        row = conn.execute(self._sql(_MERGE), params).fetchone()
        if row is None:
            return None
        stored = self.dialect.row_to_memory(row)
        return UpsertResult(id=stored.id, created=False, merged=True, memory=stored)

    def replace_with_summary(self, ids: Sequence[str], summary: NewMemory) -> tuple[UpsertResult, int]:
        """Create `summary` and delete `ids` in one transaction, so a crash leaves either
        the originals or the summary, never neither. Returns the summary and how many of
        the ids were deleted."""
        now = self.dialect.clock()
        where, param = self.dialect.syntax.any_of("id", ids)
        with self.db.write() as conn:
            created = self._create_in(conn, summary, now)
            folded = replace(current_cause(), reason=SUMMARIZED, related=created.id)
            with self.dialect.bind_cause(conn, folded, now):
                deleted = self._delete_where(conn, self._sql(" WHERE " + where), (param,), now, folded)
            return created, len(deleted)

    def rewrite_contents(self, contents: dict[str, str]) -> int:
        """Replace the content of several memories in one transaction; returns rows changed."""
        for content in contents.values():
            refuse_nul_in("content", content)
        if not contents:
            return 0
        now = self.dialect.clock()
        with self.db.write() as conn, self.dialect.bind_cause(conn, current_cause(), now):
            return self.dialect.rewrite_contents(conn, contents, now)

    def update(self, memory_id: str, patch: MemoryPatch) -> Memory | None:
        """Apply the patch in one statement (None fields untouched; metadata replaces the
        whole object). None when the id does not exist; ConflictError(DUPLICATE_KEY) when
        the new key is already used by another memory of the same owner (the unique index
        decides, inside the write transaction)."""
        refuse_nul(patch)
        syntax = self.dialect.syntax
        params = [
            patch.type,
            patch.key,
            patch.content,
            None if patch.metadata is None else dump_metadata(patch.metadata),
            patch.keep,
            syntax.time(patch.occurred_at),
            *syntax.now_params(),
            memory_id,
        ]
        with self.db.write() as conn, self.dialect.bind_cause(conn, current_cause(), self.dialect.clock()):
            try:
                row = conn.execute(self._sql(_UPDATE), params).fetchone()
            except self.db.driver_error as exc:
                mapped = self.dialect.write_error(exc, patch.key)
                if mapped is exc:
                    raise
                raise mapped from exc
            return self.dialect.row_to_memory(row) if row else None

    def delete(self, memory_id: str) -> bool:
        """Delete and forget one memory: its history and versions go with it."""
        now = self.dialect.clock()
        with self.db.write() as conn:
            return bool(self._delete_where(conn, self._sql(" WHERE id = ?"), (memory_id,), now))

    def clear(self, flt: MemoryFilter) -> int:
        """Delete every memory matching the filter (an empty filter matches all); derived
        rows (the keyword index, vectors, history) follow in the same transaction."""
        where, params = self._filter_where(flt)
        now = self.dialect.clock()
        with self.db.write() as conn:
            return len(self._delete_where(conn, where, params, now))

    def expire_due(self, now: datetime, limit: int) -> list[Memory]:
        """Delete up to `limit` memories whose expiry has passed, as expired (their history is
        forgotten like a deletion's; the change feed says `expired`). Returns them."""
        clock = self.dialect.clock()
        with self.db.write() as conn:
            due = [row[0] for row in conn.execute(self._sql(_DUE), (self.dialect.syntax.time(now), limit)).fetchall()]
            if not due:
                return []
            where, param = self.dialect.syntax.any_of("id", due)
            expired = replace(current_cause(), reason=EXPIRED)
            return self._delete_where(conn, self._sql(" WHERE " + where), (param,), clock, expired)

    def touch(self, ids: Sequence[str] | Mapping[str, int]) -> None:
        """Record that these memories were returned: access_count + n (n = how often each
        id was returned; 1 for a plain list), last_accessed_at = now, in one transaction.
        Unknown ids are ignored."""
        counts = dict(ids) if isinstance(ids, Mapping) else dict(Counter(ids))
        if not counts:
            return
        now = self.dialect.clock()
        with self.db.write() as conn:
            self.dialect.touch(conn, counts, now)

    def mark_all_for_reindex(self) -> int:
        """Reindex `force`: every memory needs a new vector."""
        with self.db.write() as conn:
            cursor = conn.execute(self._sql("UPDATE memories SET needs_reindex = {true} WHERE needs_reindex = {false}"))
            changed = self.dialect.changes(conn, cursor)
            # Vector caches remember which owners had nothing pending: this voids that.
            bump_vec_generation(conn, self.dialect.syntax)
            return changed

    # -- reads ---------------------------------------------------------------------------

    def _memories(self, rows: Sequence[Sequence[Any]]) -> list[Memory]:
        return [self.dialect.row_to_memory(r) for r in rows]

    def get(self, memory_id: str) -> Memory | None:
        with self.db.read() as conn:
            row = conn.execute(self._sql(SELECT + " WHERE id = ?"), (memory_id,)).fetchone()
        return self.dialect.row_to_memory(row) if row else None

    def get_many(self, ids: Sequence[str]) -> dict[str, Memory]:
        """The memories that exist among `ids`, by id."""
        if not ids:
            return {}
        where, param = self.dialect.syntax.any_of("id", ids)
        with self.db.read() as conn:
            rows = conn.execute(self._sql(SELECT + " WHERE " + where), (param,)).fetchall()
        return {m.id: m for m in self._memories(rows)}

    def page_by_memory_id(self, offset: int, limit: int) -> list[Memory]:
        """Every memory in memory_id order, one page (Reindex's vector backfill)."""
        with self.db.read() as conn:
            rows = conn.execute(self._sql(SELECT + " ORDER BY memory_id LIMIT ? OFFSET ?"), (limit, offset)).fetchall()
        return self._memories(rows)

    def older_than(
        self, api_key_id: str | None, cutoff: datetime, session_id: str | None = None, *, include_kept: bool = True
    ) -> list[Memory]:
        """Memories created before `cutoff`, oldest first (summarization candidates).
        `include_kept=False` leaves out memories stored with `keep`: they have no age limit,
        so folding old memories into a summary must never delete them."""
        clauses, params = ["created_at < ?"], [self.dialect.syntax.time(cutoff)]
        if not include_kept:
            clauses.append("keep = {false}")
        for column, value in (("api_key_id", api_key_id), ("session_id", session_id)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        sql = self._sql(_OLDER_THAN.format(where=" AND ".join(clauses)))
        with self.db.read() as conn:
            return self._memories(conn.execute(sql, params).fetchall())

    def _filter_where(self, flt: MemoryFilter) -> tuple[str, list[Any]]:
        """WHERE clause for a list/clear filter: fixed fragments joined, every value a bound
        parameter; `q` a literal, case-insensitive substring of content or key."""
        syntax = self.dialect.syntax
        clauses: list[str] = []
        params: list[Any] = []
        if flt.api_key_id is not None:
            clauses.append("api_key_id = ?")
            params.append(flt.api_key_id)
        if flt.owners is not None:
            owners, param = syntax.any_of("api_key_id", sorted(flt.owners))
            clauses.append(owners)
            params.append(param)
        for column, value in (("session_id", flt.session_id), ("type", flt.type)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if flt.q:
            refuse_nul_in("q", flt.q)
            found, found_params = self.dialect.contains(flt.q, self._collation)
            clauses.append(found)
            params.extend(found_params)
        if flt.created_before is not None:
            clauses.append("created_at < ?")
            params.append(syntax.time(flt.created_before))
        return (syntax.sql(" WHERE " + " AND ".join(clauses)) if clauses else ""), params

    # -- retrieval (SearchBackend) ---------------------------------------------------------

    # An owner's reads come from its working set (kept current through the change log in this
    # snapshot); across owners, or for an owner the budget cannot hold, from the store.

    def recent(self, scope: SearchScope, limit: int) -> list[Memory]:
        """Newest first within the retrieval scope."""
        where, params = scope_clause(self.dialect.syntax, scope)
        with self.db.read() as conn:
            found = self.working_sets.answer(conn, scope, lambda owner_set: owner_set.recent(scope, limit))
            if found is not None:
                return found
            rows = conn.execute(self._sql(_RECENT.format(where=where)), [*params, limit]).fetchall()
        return self._memories(rows)

    def count_aged(self, scope: SearchScope) -> int:
        """How many memories the scope hides for their age alone (0 without an age limit),
        counted up to AGED_COUNT_CAP: a range of the owner's (api_key_id, created_at) index,
        which every retrieval reads, so an owner with a million old rows must not pay for
        counting them all."""
        found = aged_clause(self.dialect.syntax, scope)
        if found is None:
            return 0
        where, params = found
        with self.db.read() as conn:
            counted = self.working_sets.answer(
                conn, scope, lambda owner_set: owner_set.count_aged(scope, AGED_COUNT_CAP)
            )
            if counted is not None:
                return int(counted)
            sql = self._sql(_COUNT_AGED.format(where=where))
            return int(conn.execute(sql, [*params, AGED_COUNT_CAP]).fetchone()[0])

    def search_keyword(self, scope: SearchScope, text: str, limit: int) -> list[KeywordHit]:
        """Best keyword matches of `text` within the scope (the working set's: FTS5's tokens
        and BM25; the store's: `Dialect.search_keyword`)."""
        with self.db.read() as conn:
            hits = self.working_sets.search_keyword(conn, scope, text, limit)
            if hits is not None:
                return hits
            return self.dialect.search_keyword(conn, scope, text, limit, self._keyword_cache)

    def happened_within(self, scope: SearchScope, windows: Sequence[TimeWindow], limit: int) -> list[Memory]:
        """Memories of the scope that happened inside the windows (see the dialect's timeline)."""
        if not windows:
            return []
        with self.db.read() as conn:
            found = self.working_sets.answer(conn, scope, lambda s: s.happened_within(scope, windows, limit))
            if found is not None:
                return found
            return self.dialect.timeline.happened_within(conn, scope, windows, limit)  # type: ignore[no-any-return]

    def neighbours(self, scope: SearchScope, memories: Sequence[Memory]) -> dict[str, list[Memory]]:
        """Each memory's neighbours in its session (see the dialect's timeline)."""
        if not memories:
            return {}
        with self.db.read() as conn:
            found = self.working_sets.answer(conn, scope, lambda owner_set: owner_set.neighbours(scope, memories))
            if found is not None:
                return found
            return self.dialect.timeline.neighbours(conn, scope, memories)  # type: ignore[no-any-return]

    def list(self, flt: MemoryFilter, limit: int, offset: int) -> MemoryPage:
        """One page, newest first (created_at, then memory_id, descending), plus total,
        per-type counts and Σ ceil(chars/4) over the whole filtered set, all read from the
        same snapshot. `by_type` always has the four types (0 when absent)."""
        if limit < 0 or offset < 0:
            raise ValueError("limit and offset must be >= 0")
        where, params = self._filter_where(flt)
        with self.db.read() as conn:
            rows = conn.execute(
                SELECT + where + NEWEST_FIRST + self._sql(" LIMIT ? OFFSET ?"), [*params, limit, offset]
            ).fetchall()
            groups = conn.execute(self._sql(_GROUPS) + where + " GROUP BY type", params).fetchall()
        by_type = dict.fromkeys(MEMORY_TYPES, 0)
        by_type.update({t: int(n) for t, n, _ in groups})
        return MemoryPage(
            data=self._memories(rows),
            total=sum(int(n) for _, n, _ in groups),
            by_type=by_type,
            tokens_used=sum(int(tokens or 0) for _, _, tokens in groups),
        )

    # -- lifecycle (memsvc.storage.lifecycle) ----------------------------------------------

    def history(self, memory_id: str, after: int, limit: int) -> builtins.list[MemoryChange]:
        """A memory's history after the entry `after` (a seq; 0: from its start), oldest first."""
        with self.db.read() as conn:
            return self.lifecycle.history(conn, memory_id, after, limit)

    def history_owner(self, memory_id: str) -> str | None:
        """The owner under which a memory's history is kept (also once the memory was folded
        into a summary); None when there is none."""
        with self.db.read() as conn:
            return self.lifecycle.history_owner(conn, memory_id)

    def versions(self, memory_id: str) -> builtins.list[Memory]:
        """The facts a memory's key superseded, oldest first, each with when it held."""
        with self.db.read() as conn:
            return self.lifecycle.versions(conn, memory_id)

    def as_of(self, owner: str, moment: datetime) -> PastView:
        """The owner's memories as they were at `moment` (each one's version valid then),
        searchable as the live ones are (memsvc.working_set.past), from one snapshot."""
        with self.db.read() as conn:
            return self.working_sets.past(
                conn,
                owner,
                moment,
                lambda: (self.lifecycle.valid_at(conn, owner, moment), self.lifecycle.newer_than(conn, owner, moment)),
            )

    def feed_head(self) -> str:
        """The change feed's position after everything committed so far."""
        with self.db.read() as conn:
            return self.lifecycle.head(conn)

    def feed(self, token: str, owners: Sequence[str] | None, limit: int) -> FeedPage:
        """Up to `limit` changes after `token` of `owners` (None: all), in one snapshot."""
        with self.db.read() as conn:
            return self.lifecycle.feed(conn, token, owners, limit)
