"""Memories by when they happened (coalesce(occurred_at, created_at)): the memories of a
span a question names, and the turns just before and after a turn in its session. Both read
the indexes of migration 0009, so their cost grows with what they return, not with the
owner's memories."""

from __future__ import annotations

import json
from typing import Sequence

import apsw

from memsvc.kernel.models import Memory, SearchScope
from memsvc.kernel.time_phrases import TimeWindow
from memsvc.storage.database import iso
from memsvc.storage.keyword import rows_in_scope, scope_clause
from memsvc.storage.memory_rows import M_COLUMNS, row_to_memory

HAPPENED = "coalesce({a}.occurred_at, {a}.created_at)"
# The turn just before (<, newest first) and just after (>, oldest first) each given memory,
# in the same owner's same session; row values so ties of one instant order by memory_id (the
# plain <= / >= beside them is what lets SQLite seek the index instead of walking the session).
_NEIGHBOUR = ("(SELECT n.memory_id FROM memories n WHERE n.api_key_id = m.api_key_id AND n.session_id = m.session_id"
              " AND n.type = m.type AND {n} {op}= {m} AND ({n}, n.memory_id) {op} ({m}, m.memory_id)"
              " ORDER BY {n} {order}, n.memory_id {order} LIMIT 1)")
_NEIGHBOURS = ("SELECT m.id, " + _NEIGHBOUR.format(n=HAPPENED.format(a="n"), m=HAPPENED.format(a="m"), op="<",
                                                   order="DESC")
               + ", " + _NEIGHBOUR.format(n=HAPPENED.format(a="n"), m=HAPPENED.format(a="m"), op=">", order="ASC")
               + " FROM json_each(?) j CROSS JOIN memories m ON m.memory_id = j.value WHERE m.session_id IS NOT NULL")


def happened_within(conn: apsw.Connection, scope: SearchScope, windows: Sequence[TimeWindow],
                    limit: int) -> list[Memory]:
    """Up to `limit` memories of the scope per window that happened inside it, in time order."""
    where, params = scope_clause(scope)
    happened = HAPPENED.format(a="m")
    found: dict[str, Memory] = {}
    for window in windows:
        rows = conn.execute(f"SELECT {M_COLUMNS} FROM memories m WHERE {where} AND {happened} >= ? AND {happened} < ?"
                            f" ORDER BY {happened}, m.memory_id LIMIT ?",
                            [*params, iso(window.start), iso(window.end), limit]).fetchall()
        found.update((m.id, m) for m in map(row_to_memory, rows))
    return list(found.values())


def neighbours(conn: apsw.Connection, scope: SearchScope, memories: Sequence[Memory]) -> dict[str, list[Memory]]:
    """memory id → the memories of the same type just before and after it in its session
    that the scope may see (a memory without a session has none)."""
    pairs = conn.execute(_NEIGHBOURS, [json.dumps([m.memory_id for m in memories])]).fetchall()
    wanted = {n for _, before, after in pairs for n in (before, after) if n is not None}
    if not wanted:
        return {}
    visible = {m.memory_id: m for m in map(row_to_memory, rows_in_scope(conn, M_COLUMNS, sorted(wanted), scope))}
    return {memory_id: [visible[n] for n in (before, after) if n in visible] for memory_id, before, after in pairs}
