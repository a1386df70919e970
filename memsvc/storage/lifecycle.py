"""The lifecycle of memories in the store, for both databases: the cause a write binds for the
history triggers (SQLite migration 0013, PostgreSQL 0004), what a deletion leaves behind
(forgetting), the versions valid at an instant, a memory's history and the change feed.

Why history is written by triggers and deletions here: a creation or an update is one
statement whose old and new row only the database sees at once (PostgreSQL's keyed upsert is
a single INSERT … ON CONFLICT), so a row trigger records it in that statement's transaction,
whatever path wrote it. A deletion decides what to forget — the memory's history, its
versions, and those of what was summarized into it — which is a walk the store does once, in
the deleting transaction, for every path that deletes (`SqlMemoryBackend._delete_where`).

Positions in the change feed are opaque tokens: `1.<seq>` on SQLite, whose writers take
turns, so `seq` is commit order; `2.<txid>.<seq>` on PostgreSQL, read only below the oldest
running transaction (migrations/postgres/0004 says why), so a follower never skips a row
that commits late.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from memsvc.kernel.changes import (
    DELETED,
    EXPIRED,
    SUMMARIZED,
    ChangeCause,
    FeedEvent,
    FeedPage,
    MemoryChange,
)
from memsvc.kernel.errors import ValidationError
from memsvc.kernel.models import Memory
from memsvc.storage.database import iso
from memsvc.storage.dialect import Syntax
from memsvc.storage.memory_rows import COLUMNS, dump_metadata

_HISTORY = "SELECT seq, id, api_key_id, event, at, author, changes, related FROM memory_history"
_VERSION_COLUMNS = (
    "id, memory_id, api_key_id, session_id, type, key, content, metadata, created_at, updated_at, "
    "expires_at, 0, NULL, 0, keep, occurred_at, valid_from, valid_to"
)
_INSERT_VERSION = (
    "INSERT INTO memory_versions (memory_id, id, api_key_id, session_id, type, key, content, metadata, "
    "created_at, updated_at, expires_at, keep, occurred_at, valid_from, valid_to) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, {json}, {ts}, {ts}, {ts}, {bool}, {ts}, {ts}, {at})"
)
_INSERT_EVENT = (
    "INSERT INTO memory_history (id, api_key_id, event, at, author, changes, related) "
    "VALUES (?, ?, ?, {at}, ?, {json}, ?)"
)
#: How many summary levels a deletion follows (a summary of summaries of ...).
_MAX_SUMMARY_DEPTH = 32

# -- feed positions ------------------------------------------------------------------------


@dataclass(frozen=True)
class FeedSql:
    """How one database reads its change feed: a position is a tuple of ints; `prefix` marks
    the store kind in a token; `head` the position a new follower starts after; `after` the
    statement reading rows after a position (its parameters from `params`), oldest first."""

    prefix: str
    width: int
    head: str
    after: str
    owner_after: str
    params: Callable[[tuple[int, ...]], list[Any]]
    #: The position of a row read by `after` (its leading columns).
    position: Callable[[Sequence[Any]], tuple[int, ...]]

    def token(self, position: tuple[int, ...]) -> str:
        return ".".join([self.prefix, *map(str, position)])

    def parse(self, token: str) -> tuple[int, ...]:
        """A token this store issued; ValidationError (resumeToken) for any other."""
        parts = token.split(".")
        if len(parts) != self.width + 1 or parts[0] != self.prefix or not all(p.isdigit() for p in parts[1:]):
            raise ValidationError.single("resumeToken", "is not a position of this store's change feed")
        return tuple(int(p) for p in parts[1:])


_FEED_COLUMNS = "id, api_key_id, event, at, author, changes, related"
SQLITE_FEED = FeedSql(
    prefix="1",
    width=1,
    head="SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'memory_history'), 0)",
    after=f"SELECT seq, {_FEED_COLUMNS} FROM memory_history WHERE seq > ? ORDER BY seq LIMIT ?",
    owner_after=(
        f"SELECT seq, {_FEED_COLUMNS} FROM memory_history WHERE seq > ? "
        "AND api_key_id IN (SELECT value FROM json_each(?)) ORDER BY seq LIMIT ?"
    ),
    params=lambda position: [position[0]],
    position=lambda row: (int(row[0]),),
)
_PG_VISIBLE = "txid < pg_snapshot_xmin(pg_current_snapshot())"
POSTGRES_FEED = FeedSql(
    prefix="2",
    width=2,
    head="SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint",
    after=(
        f"SELECT txid::text::bigint, seq, {_FEED_COLUMNS} FROM memory_history "
        f"WHERE (txid, seq) > (%s::text::xid8, %s) AND {_PG_VISIBLE} ORDER BY txid, seq LIMIT %s"
    ),
    owner_after=(
        f"SELECT txid::text::bigint, seq, {_FEED_COLUMNS} FROM memory_history "
        f"WHERE (txid, seq) > (%s::text::xid8, %s) AND {_PG_VISIBLE} AND api_key_id = ANY(%s::text[]) "
        "ORDER BY txid, seq LIMIT %s"
    ),
    params=lambda position: [str(position[0]), position[1]],
    position=lambda row: (int(row[0]), int(row[1])),
)


#: The fields of a history entry that hold a time: SQLite's triggers write them as stored
#: (…Z), PostgreSQL's as jsonb prints a timestamptz (…+00:00); both become the stored form.
_TIME_FIELDS = ("expiresAt", "occurredAt", "validFrom")


def _canonical_times(changes: dict[str, Any]) -> dict[str, Any]:
    out = dict(changes or {})
    for name in _TIME_FIELDS:
        value = out.get(name)
        if isinstance(value, str):
            out[name] = iso(datetime.fromisoformat(value))
    return out


def _head_position(feed: FeedSql, head: int) -> tuple[int, ...]:
    """SQLite's head is the newest seq; PostgreSQL's the oldest running transaction, before
    whose every row a follower may stand."""
    return (head,) if feed.width == 1 else (head, 0)


# -- the store's reads and writes ----------------------------------------------------------


class Lifecycle:
    """History, versions, forgetting and the feed over one database's `Syntax` and `FeedSql`;
    `row_to_memory` turns a COLUMNS row of this database into a Memory."""

    def __init__(self, syntax: Syntax, feed: FeedSql, row_to_memory: Callable[[Sequence[Any]], Memory]) -> None:
        self.syntax = syntax
        self.feed_sql = feed
        self.row_to_memory = row_to_memory
        self._sql = syntax.sql

    # -- forgetting ------------------------------------------------------------------------

    def deleted(self, conn: Any, rows: Sequence[Memory], cause: ChangeCause, at: str | None) -> None:
        """What the deletion of `rows` leaves in the history, inside its transaction: a
        summary keeps the history of what it folded, with the version that was valid until
        now; any other deletion forgets the memories (and what was summarized into them) and
        leaves only an entry naming each id and the kind of deletion."""
        if not rows:
            return
        if cause.reason == SUMMARIZED:
            for memory in rows:
                self._archive(conn, memory, at)
            self._events(conn, rows, SUMMARIZED, cause, at, related=cause.related)
            return
        forgotten = self._with_summarized([m.id for m in rows], conn)
        where, param = self.syntax.any_of("id", sorted(forgotten))
        conn.execute(self._sql(f"DELETE FROM memory_history WHERE {where}"), (param,))
        conn.execute(self._sql(f"DELETE FROM memory_versions WHERE {where}"), (param,))
        self._events(conn, rows, EXPIRED if cause.reason == EXPIRED else DELETED, cause, at, related=None)

    def _with_summarized(self, ids: list[str], conn: Any) -> set[str]:
        """`ids` and, level by level, every memory summarized into one of them."""
        found, frontier = set(ids), list(ids)
        for _ in range(_MAX_SUMMARY_DEPTH):
            if not frontier:
                break
            where, param = self.syntax.any_of("related", frontier)
            sql = self._sql(f"SELECT DISTINCT id FROM memory_history WHERE event = '{SUMMARIZED}' AND {where}")
            frontier = [row[0] for row in conn.execute(sql, (param,)).fetchall() if row[0] not in found]
            found.update(frontier)
        return found

    def _at(self, sql: str, at: str | None) -> tuple[str, list[Any]]:
        """`sql` with {at} as the write's time: SQLite's clock value, PostgreSQL's now()."""
        return self._sql(sql.replace("{at}", "?" if at is not None else "now()")), ([at] if at is not None else [])

    def _archive(self, conn: Any, memory: Memory, at: str | None) -> None:
        sql, at_params = self._at(_INSERT_VERSION, at)
        t = self.syntax.time
        conn.execute(
            sql,
            [
                memory.memory_id,
                memory.id,
                memory.api_key_id,
                memory.session_id,
                memory.type,
                memory.key,
                memory.content,
                dump_metadata(memory.metadata),
                t(memory.created_at),
                t(memory.updated_at),
                t(memory.expires_at),
                memory.keep,
                t(memory.occurred_at),
                t(memory.valid_since),
                *at_params,
            ],
        )

    def _events(
        self, conn: Any, rows: Sequence[Memory], event: str, cause: ChangeCause, at: str | None, related: str | None
    ) -> None:
        sql, at_params = self._at(_INSERT_EVENT, at)
        for memory in rows:
            params = [memory.id, memory.api_key_id, event, *at_params, cause.author, "{}", related]
            conn.execute(sql, params)

    # -- reads -----------------------------------------------------------------------------

    def history(self, conn: Any, memory_id: str, after: int, limit: int) -> list[MemoryChange]:
        """A memory's entries after `after` (a seq), oldest first."""
        sql = self._sql(_HISTORY + " WHERE id = ? AND seq > ? ORDER BY seq LIMIT ?")
        return [self._change(row[0], row[1:]) for row in conn.execute(sql, (memory_id, after, limit)).fetchall()]

    def history_owner(self, conn: Any, memory_id: str) -> str | None:
        """The owner a memory's history is kept under (None: none is kept)."""
        row = conn.execute(self._sql("SELECT api_key_id FROM memory_history WHERE id = ? LIMIT 1"), (memory_id,))
        found = row.fetchone()
        return None if found is None else str(found[0])

    def _change(self, seq: int, row: Sequence[Any]) -> MemoryChange:
        memory_id, owner, event, at, author, changes, related = row
        parsed = _canonical_times(self.syntax.read_json(changes) if changes is not None else {})
        moment = self.syntax.read_time(at)
        assert moment is not None  # NOT NULL
        return MemoryChange(int(seq), memory_id, owner, event, moment, author or "", dict(parsed or {}), related)

    def valid_at(self, conn: Any, owner: str, moment: datetime) -> list[Memory]:
        """The owner's memories as they were at `moment`: each memory's version valid then
        (the current one, or one a later fact superseded), none that began after it. Expiry,
        session and retention are the caller's to apply, as of `moment`."""
        t = self.syntax.time(moment)
        current = self._sql(
            f"SELECT {COLUMNS} FROM memories WHERE api_key_id = ? "
            "AND coalesce(valid_from, occurred_at, created_at) <= ?"
        )
        memories = [self.row_to_memory(r) for r in conn.execute(current, (owner, t)).fetchall()]
        past = self._sql(
            f"SELECT {_VERSION_COLUMNS} FROM memory_versions WHERE api_key_id = ? AND valid_to > ? AND valid_from <= ?"
        )
        for row in conn.execute(past, (owner, t, t)).fetchall():
            version = self.row_to_memory(row[:-1])
            memories.append(replace(version, valid_to=self.syntax.read_time(row[-1])))
        return memories

    def newer_than(self, conn: Any, owner: str, moment: datetime) -> int:
        """How many of the owner's current memories began after `moment`."""
        sql = self._sql(
            "SELECT count(*) FROM memories WHERE api_key_id = ? AND coalesce(valid_from, occurred_at, created_at) > ?"
        )
        return int(conn.execute(sql, (owner, self.syntax.time(moment))).fetchone()[0])

    def versions(self, conn: Any, memory_id: str) -> list[Memory]:
        """The superseded versions of a memory, oldest first (their `valid_to` set)."""
        sql = self._sql(f"SELECT {_VERSION_COLUMNS} FROM memory_versions WHERE id = ? ORDER BY valid_to")
        return [
            replace(self.row_to_memory(r[:-1]), valid_to=self.syntax.read_time(r[-1]))
            for r in conn.execute(sql, (memory_id,)).fetchall()
        ]

    # -- the change feed -------------------------------------------------------------------

    def head(self, conn: Any) -> str:
        """The position after every change committed so far (where a new follower starts)."""
        row = conn.execute(self.feed_sql.head).fetchone()
        return self.feed_sql.token(_head_position(self.feed_sql, int(row[0] or 0)))

    def feed(self, conn: Any, token: str, owners: Sequence[str] | None, limit: int) -> FeedPage:
        """Up to `limit` events after `token` of `owners` (None: every owner), oldest first, in
        one snapshot, with each live memory as stored now. The page's token is the last
        event's position, or, when fewer than `limit` matched, the head (nothing the follower
        may see lies between)."""
        feed = self.feed_sql
        position = feed.parse(token)
        if owners is None:
            rows = conn.execute(feed.after, [*feed.params(position), limit]).fetchall()
        else:
            listed = self.syntax.list_value(sorted(owners))
            rows = conn.execute(feed.owner_after, [*feed.params(position), listed, limit]).fetchall()
        changes = [(feed.position(r), self._change(feed.position(r)[-1], r[feed.width :])) for r in rows]
        live = self._live(conn, [c.memory_id for _, c in changes])
        events = [FeedEvent(feed.token(p), c, live.get(c.memory_id)) for p, c in changes]
        if len(rows) >= limit:
            return FeedPage(events, events[-1].token)
        head = _head_position(feed, int(conn.execute(feed.head).fetchone()[0] or 0))
        return FeedPage(events, feed.token(max(head, changes[-1][0] if changes else position, position)))

    def _live(self, conn: Any, ids: list[str]) -> dict[str, Memory]:
        if not ids:
            return {}
        where, param = self.syntax.any_of("id", sorted(set(ids)))
        rows = conn.execute(self._sql(f"SELECT {COLUMNS} FROM memories WHERE {where}"), (param,)).fetchall()
        return {m.id: m for m in map(self.row_to_memory, rows)}
