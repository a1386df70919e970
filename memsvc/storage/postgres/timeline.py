"""Memories by when they happened (coalesce(occurred_at, created_at)) on PostgreSQL: the
memories of a span a question names, and the turns just before and after a turn in its
session. Both read the (owner, time) and (owner, session, time) indexes of the initial
migration, so their cost grows with what they return, not with the owner's memories."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memsvc.kernel.models import Memory, SearchScope
from memsvc.kernel.time_phrases import TimeWindow
from memsvc.storage.postgres.rows import HAPPENED, M_COLUMNS, row_to_memory, rows_in_scope, scope_clause

_N, _M = HAPPENED.format(a="n"), HAPPENED.format(a="m")
# The turn just before (<, newest first) and just after (>, oldest first) a memory, in the
# same owner's same session and of the same type; a row comparison, so ties of one instant
# order by memory_id and the index is sought, not walked.
_NEIGHBOUR = ("(SELECT n.memory_id FROM memories n WHERE n.api_key_id = m.api_key_id AND n.session_id = m.session_id"
              " AND n.type = m.type AND ({n}, n.memory_id) {op} ({m}, m.memory_id)"
              " ORDER BY {n} {order}, n.memory_id {order} LIMIT 1)")
_NEIGHBOURS = ("SELECT m.memory_id, " + _NEIGHBOUR.format(n=_N, m=_M, op="<", order="DESC") + ", "
               + _NEIGHBOUR.format(n=_N, m=_M, op=">", order="ASC")
               + " FROM memories m WHERE m.memory_id = ANY(%s::bigint[]) AND m.session_id IS NOT NULL")


def happened_within(conn: Any, scope: SearchScope, windows: Sequence[TimeWindow], limit: int) -> list[Memory]:
    """Up to `limit` memories of the scope per window that happened inside [start, end),
    in time order."""
    where, params = scope_clause(scope)
    found: dict[str, Memory] = {}
    for window in windows:
        rows = conn.execute(f"SELECT {M_COLUMNS} FROM memories m WHERE {where} AND {_M} >= %s AND {_M} < %s"
                            f" ORDER BY {_M}, m.memory_id LIMIT %s",
                            [*params, window.start, window.end, limit]).fetchall()
        found.update((m.id, m) for m in map(row_to_memory, rows))
    return list(found.values())


def neighbours(conn: Any, scope: SearchScope, memories: Sequence[Memory]) -> dict[str, list[Memory]]:
    """memory id → the memories of the same type just before and after it in its session
    that the scope may see (a memory without a session has none)."""
    by_memory_id = {m.memory_id: m.id for m in memories}
    pairs = conn.execute(_NEIGHBOURS, [list(by_memory_id)]).fetchall()
    wanted = {n for _, before, after in pairs for n in (before, after) if n is not None}
    if not wanted:
        return {}
    visible = {m.memory_id: m for m in rows_in_scope(conn, sorted(wanted), scope)}
    return {by_memory_id[memory_id]: [visible[n] for n in (before, after) if n in visible]
            for memory_id, before, after in pairs}
