"""The `memories` row as the PostgreSQL backend reads it, and the WHERE fragments it shares
between its reads: the list/clear filter and the retrieval scope.

The column list is the SQLite one (`memsvc.storage.memory_rows.COLUMNS`), so both stores
return the same row shape; only the conversion differs: psycopg hands back `timestamptz`
as aware datetimes in the session's time zone (turned to UTC here, as every Memory's times
are) and `jsonb` already parsed. Every value is a bound `%s` parameter; the only text
joined into SQL is the fixed fragments below.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any, ContextManager

import psycopg

from memsvc.kernel.models import Memory, MemoryFilter, SearchScope
from memsvc.storage.memory_rows import COLUMNS, M_COLUMNS, NEWEST_FIRST, RETURNING, SELECT, dump_metadata

__all__ = ["COLUMNS", "M_COLUMNS", "NEWEST_FIRST", "RETURNING", "SELECT", "dump_metadata", "row_to_memory",
           "filter_clause", "scope_clause", "aged_clause", "HAPPENED", "casefold_collation"]

#: When a memory happened: what signals about time read (occurred_at, else created_at).
HAPPENED = "coalesce({a}.occurred_at, {a}.created_at)"

#: Collations under which lower() may fold every script, best first: ICU's root collation,
#: then glibc's C.utf8. The default collation of a database created with locale C folds
#: ASCII only ("ÄPFEL" stays "Äpfel"), and a server built without ICU lists "unicode" but
#: refuses to use it, so each is tried.
_FOLDING_COLLATIONS = ("unicode", "C.utf8")
_FOLD_PROBE = "SELECT lower(%s::text COLLATE \"{name}\") = %s"


def _utc(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.astimezone(timezone.utc)


def row_to_memory(row: Sequence[Any]) -> Memory:
    """The single place a `COLUMNS` row of PostgreSQL becomes a Memory (UTC datetimes, the
    metadata a dict)."""
    (id_, memory_id, api_key_id, session_id, type_, key, content, metadata, created_at, updated_at,
     expires_at, access_count, last_accessed_at, needs_reindex, keep, occurred_at) = row
    return Memory(
        id=id_,
        memory_id=int(memory_id),
        api_key_id=api_key_id,
        session_id=session_id,
        type=type_,
        key=key,
        content=content,
        metadata=dict(metadata or {}),
        created_at=_utc(created_at),
        updated_at=_utc(updated_at),
        expires_at=_utc(expires_at),
        access_count=int(access_count),
        last_accessed_at=_utc(last_accessed_at),
        needs_reindex=bool(needs_reindex),
        keep=bool(keep),
        occurred_at=_utc(occurred_at),
    )


def casefold_collation(read: Callable[[], ContextManager[Any]]) -> str | None:
    """The collation `filter_clause` folds case under: the first of _FOLDING_COLLATIONS that
    folds "ÄΣ" to "äσ" here, each tried in a read transaction of its own (`read`, as
    PgDatabase.read) since a refused one aborts it; None (the database's own) when none does."""
    for name in _FOLDING_COLLATIONS:
        try:
            with read() as conn:
                if conn.execute(_FOLD_PROBE.format(name=name), ("ÄΣ", "äσ")).fetchone()[0]:
                    return name
        except psycopg.Error:
            continue
    return None


def _folded(expr: str, collation: str | None) -> str:
    return f'lower({expr} COLLATE "{collation}")' if collation else f"lower({expr})"


def filter_clause(flt: MemoryFilter, collation: str | None) -> tuple[str, list[Any]]:
    """WHERE clause for a list/clear filter. `q` is a literal, case-insensitive substring of
    content or key: strpos() has no wildcards, so "%" and "_" need no escaping."""
    clauses: list[str] = []
    params: list[Any] = []
    if flt.api_key_id is not None:
        clauses.append("api_key_id = %s")
        params.append(flt.api_key_id)
    if flt.owners is not None:
        clauses.append("api_key_id = ANY(%s::text[])")
        params.append(sorted(flt.owners))
    if flt.session_id is not None:
        clauses.append("session_id = %s")
        params.append(flt.session_id)
    if flt.type is not None:
        clauses.append("type = %s")
        params.append(flt.type)
    if flt.q:
        needle, key = _folded("%s::text", collation), _folded("coalesce(key, '')", collation)
        clauses.append(f"(strpos({_folded('content', collation)}, {needle}) > 0 OR strpos({key}, {needle}) > 0)")
        params.extend([flt.q, flt.q])
    if flt.created_before is not None:
        clauses.append("created_at < %s")
        params.append(flt.created_before)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _visible_clause(scope: SearchScope, alias: str) -> tuple[str, list[Any]]:
    """Owner, session and expiry: the scope's limits other than age. A session scope with
    no session id sees the memories stored without one (as SQLite's `IS ?` does)."""
    clauses = [f"({alias}.expires_at IS NULL OR {alias}.expires_at > %s)"]
    params: list[Any] = [scope.now]
    if scope.api_key_id is not None:
        clauses.append(f"{alias}.api_key_id = %s")
        params.append(scope.api_key_id)
    if scope.session_only:
        clauses.append(f"{alias}.session_id IS NOT DISTINCT FROM %s::text")
        params.append(scope.session_id)
    return " AND ".join(clauses), params


def scope_clause(scope: SearchScope, alias: str = "m") -> tuple[str, list[Any]]:
    """WHERE fragments selecting what a retrieval may see (owner, session, not expired,
    inside retention or kept), on table alias `alias`."""
    where, params = _visible_clause(scope, alias)
    if scope.created_after is not None:
        where += f" AND ({alias}.created_at >= %s OR {alias}.keep)"
        params.append(scope.created_after)
    return where, params


def aged_clause(scope: SearchScope, alias: str = "m") -> tuple[str, list[Any]] | None:
    """WHERE fragments for what the scope would see but for its age (older than retention,
    not kept); None when the scope has no age limit."""
    if scope.created_after is None:
        return None
    where, params = _visible_clause(scope, alias)
    return where + f" AND {alias}.created_at < %s AND NOT {alias}.keep", [*params, scope.created_after]


def rows_in_scope(conn: Any, memory_ids: Sequence[int], scope: SearchScope) -> list[Memory]:
    """The given memories (by memory_id) that are in the scope, in no order."""
    where, params = scope_clause(scope)
    rows = conn.execute(f"SELECT {M_COLUMNS} FROM memories m WHERE m.memory_id = ANY(%s::bigint[]) AND {where}",
                        [list(memory_ids), *params]).fetchall()
    return [row_to_memory(r) for r in rows]
