"""The `memories` row as PostgreSQL returns it, and the case folding of its text filters.

The column list is the SQLite one (`memsvc.storage.memory_rows.COLUMNS`), so both stores
return the same row shape; only the conversion differs: psycopg hands back `timestamptz`
as aware datetimes in the session's time zone (turned to UTC here, as every Memory's times
are) and `jsonb` already parsed. `scope_clause` and `rows_in_scope` are the scope rule
(`memsvc.storage.dialect.scope_clause`) in PostgreSQL's syntax.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg

from memsvc.kernel.models import Memory, SearchScope
from memsvc.storage import dialect
from memsvc.storage.memory_rows import (
    ACCESS_COUNT,
    LAST_ACCESSED,
    M_COLUMNS,
    RETURNING,
    SELECT,
    build_memory,
    dump_metadata,
    without_access,
)

__all__ = [
    "M_COLUMNS",
    "RETURNING",
    "SELECT",
    "casefold_collation",
    "dump_metadata",
    "folded",
    "row_to_memory",
    "rows_in_scope",
    "scope_clause",
]

#: Collations under which lower() may fold every script, best first: ICU's root collation,
#: then glibc's C.utf8. The default collation of a database created with locale C folds
#: ASCII only ("ÄPFEL" stays "Äpfel"), and a server built without ICU lists "unicode" but
#: refuses to use it, so each is tried.
_FOLDING_COLLATIONS = ("unicode", "C.utf8")
_FOLD_PROBE = 'SELECT lower(%s::text COLLATE "{name}") = %s'

scope_clause = functools.partial(dialect.scope_clause, dialect.POSTGRES_SQL)
_utc = dialect.POSTGRES_SQL.read_time


def _parsed(metadata: Any) -> dict[str, Any]:
    return dict(metadata or {})


def row_to_memory(row: Sequence[Any]) -> Memory:
    """The single place a `COLUMNS` row of PostgreSQL becomes a Memory (UTC datetimes, the
    metadata a dict)."""
    return build_memory(without_access(row), _utc, _parsed, int(row[ACCESS_COUNT]), _utc(row[LAST_ACCESSED]))


def casefold_collation(read: Callable[[], AbstractContextManager[Any]]) -> str | None:
    """The collation text filters fold case under: the first of _FOLDING_COLLATIONS that
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


def folded(expr: str, collation: str | None) -> str:
    """`expr` lower-cased under `collation` (the database's own when None)."""
    return f'lower({expr} COLLATE "{collation}")' if collation else f"lower({expr})"


def rows_in_scope(conn: Any, memory_ids: Sequence[int], scope: SearchScope) -> list[Memory]:
    """The given memories (by memory_id) that are in the scope, in no order."""
    where, params = scope_clause(scope)
    rows = conn.execute(
        f"SELECT {M_COLUMNS} FROM memories m WHERE m.memory_id = ANY(%s::bigint[]) AND {where}",
        [list(memory_ids), *params],
    ).fetchall()
    return [row_to_memory(r) for r in rows]
