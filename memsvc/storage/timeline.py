"""Memories by when they happened (coalesce(occurred_at, created_at)): the memories of a
span a question names, and the turns just before and after a turn in its session. Both read
the (owner, time) and (owner, session, time) indexes (SQLite's migration 0009, PostgreSQL's
initial one), so their cost grows with what they return, not with the owner's memories. One
`Timeline` for both databases; each keeps its own way of seeking the neighbours' index."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memsvc.kernel.models import Memory, SearchScope
from memsvc.kernel.time_phrases import TimeWindow
from memsvc.storage.dialect import SQLITE_SQL, Syntax, scope_clause
from memsvc.storage.keyword import rows_in_scope
from memsvc.storage.memory_rows import M_COLUMNS, row_to_memory

HAPPENED = "coalesce({a}.occurred_at, {a}.created_at)"
_N, _M = HAPPENED.format(a="n"), HAPPENED.format(a="m")
# The turn just before (<, newest first) and just after (>, oldest first) a memory, in the
# same owner's same session and of the same type; a row comparison, so ties of one instant
# order by memory_id. {seek}: what lets the database seek the index instead of walking it.
_NEIGHBOUR = (
    "(SELECT n.memory_id FROM memories n WHERE n.api_key_id = m.api_key_id AND n.session_id = m.session_id"
    " AND n.type = m.type AND {seek}({n}, n.memory_id) {op} ({m}, m.memory_id)"
    " ORDER BY {n} {order}, n.memory_id {order} LIMIT 1)"
)
_WITHIN = (
    f"SELECT {M_COLUMNS} FROM memories m WHERE {{where}} AND {_M} >= ? AND {_M} < ? ORDER BY {_M}, m.memory_id LIMIT ?"
)


class Timeline:
    """The two reads on one database: `syntax`, its rows as Memories (`row_to_memory`, and
    `visible`: the memories of memory ids the scope may see), `seek` (the plain <= / >= a
    database needs beside the row comparison to seek the index; {op} is < or >) and
    `memories_from` (the FROM and WHERE of the memories the neighbours are asked for, by
    the list of memory ids bound as one parameter)."""

    def __init__(
        self,
        syntax: Syntax,
        row_to_memory: Callable[[Sequence[Any]], Memory],
        visible: Callable[[Any, list[int], SearchScope], list[Memory]],
        seek: str,
        memories_from: str,
    ) -> None:
        self.syntax = syntax
        self.row_to_memory = row_to_memory
        self.visible = visible
        sides = (
            _NEIGHBOUR.format(seek=seek.format(n=_N, m=_M, op=op), n=_N, m=_M, op=op, order=order)
            for op, order in (("<", "DESC"), (">", "ASC"))
        )
        self._neighbours = syntax.sql(f"SELECT m.id, {', '.join(sides)} {memories_from}")

    def happened_within(self, conn: Any, scope: SearchScope, windows: Sequence[TimeWindow], limit: int) -> list[Memory]:
        """Up to `limit` memories of the scope per window that happened inside [start, end),
        in time order."""
        where, params = scope_clause(self.syntax, scope)
        sql = self.syntax.sql(_WITHIN.replace("{where}", where))
        found: dict[str, Memory] = {}
        for window in windows:
            rows = conn.execute(sql, [*params, self.syntax.time(window.start), self.syntax.time(window.end), limit])
            found.update((m.id, m) for m in map(self.row_to_memory, rows.fetchall()))
        return list(found.values())

    def neighbours(self, conn: Any, scope: SearchScope, memories: Sequence[Memory]) -> dict[str, list[Memory]]:
        """memory id → the memories of the same type just before and after it in its session
        that the scope may see (a memory without a session has none)."""
        pairs = conn.execute(self._neighbours, [self.syntax.list_value([m.memory_id for m in memories])]).fetchall()
        wanted = {n for _, before, after in pairs for n in (before, after) if n is not None}
        if not wanted:
            return {}
        visible = {m.memory_id: m for m in self.visible(conn, sorted(wanted), scope)}
        return {memory_id: [visible[n] for n in (before, after) if n in visible] for memory_id, before, after in pairs}


def _visible(conn: Any, memory_ids: list[int], scope: SearchScope) -> list[Memory]:
    return [row_to_memory(r) for r in rows_in_scope(conn, M_COLUMNS, memory_ids, scope)]


_SQLITE = Timeline(
    SQLITE_SQL,
    row_to_memory,
    _visible,
    seek="{n} {op}= {m} AND ",
    memories_from="FROM json_each(?) j CROSS JOIN memories m ON m.memory_id = j.value WHERE m.session_id IS NOT NULL",
)
happened_within = _SQLITE.happened_within
neighbours = _SQLITE.neighbours
