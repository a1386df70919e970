"""Keyword search over the FTS5 indexes, and the scope filter retrieval shares.

FTS5 query syntax is built here, not from raw user text: every term is quoted (with `"`
doubled), so `C++`, `Johnson & Johnson`, `parens(test)`, `asterisk*` or a lone `"` are
searched as words and never parsed as operators; terms are ORed so one matching word is
enough and bm25 ranks rows that match more of them higher.

This is the store's keyword search: what no working set answers (scope global, an owner
the working-set budget cannot hold, or a budget of 0) is searched here, over the shared
indexes, with the scope's filter.
"""

from __future__ import annotations

import json
from typing import Any

import apsw

from memsvc.core.models import KeywordHit, SearchScope
from memsvc.core.text import Terms, ngrams, terms
from memsvc.storage.database import iso


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def word_query(t: Terms) -> str | None:
    """Query for the unicode61/porter index: the words, ORed."""
    return " OR ".join(_quote(w) for w in t.words) or None


def cjk_query(t: Terms) -> str | None:
    """Query for the trigram index: every trigram of every CJK run of 3+ characters (the
    trigram tokenizer cannot match shorter strings; the relevance score still counts them)."""
    grams: list[str] = []
    for run in t.cjk_runs:
        if len(run) >= 3:
            grams += [g for g in ngrams(run, 3) if g not in grams]
    return " OR ".join(_quote(g) for g in grams) or None


def scope_clause(scope: SearchScope, alias: str = "m") -> tuple[str, list[Any]]:
    """WHERE fragments that select the memories a retrieval may see (owner, session, not
    expired, inside retention or kept), on table alias `alias`."""
    where, params = _visible_clause(scope, alias)
    if scope.created_after is not None:
        where += f" AND ({alias}.created_at >= ? OR {alias}.keep = 1)"
        params.append(iso(scope.created_after))
    return where, params


def aged_clause(scope: SearchScope, alias: str = "m") -> tuple[str, list[Any]] | None:
    """WHERE fragments for the memories the scope would see but for their age (older than
    the retention window and not kept); None when the scope has no age limit."""
    if scope.created_after is None:
        return None
    where, params = _visible_clause(scope, alias)
    return where + f" AND {alias}.created_at < ? AND {alias}.keep = 0", [*params, iso(scope.created_after)]


def _visible_clause(scope: SearchScope, alias: str) -> tuple[str, list[Any]]:
    """Owner, session and expiry: the scope's limits other than age."""
    clauses = [f"({alias}.expires_at IS NULL OR {alias}.expires_at > ?)"]
    params: list[Any] = [iso(scope.now)]
    if scope.api_key_id is not None:
        clauses.append(f"{alias}.api_key_id = ?")
        params.append(scope.api_key_id)
    if scope.session_only:
        clauses.append(f"{alias}.session_id IS ?")
        params.append(scope.session_id)
    return " AND ".join(clauses), params


def rows_in_scope(conn: apsw.Connection, columns: str, memory_ids: list[int], scope: SearchScope) -> list[Any]:
    """`columns` of the given memories (alias m) that are in the scope, in no order.

    The id list drives the join (CROSS JOIN fixes the order): written as `memory_id IN
    (...) AND api_key_id = ?`, SQLite walked the owner's whole index range instead (2 ms
    for 20 ids of an owner with 10k memories)."""
    where, params = scope_clause(scope)
    return conn.execute(f"SELECT {columns} FROM json_each(?) j CROSS JOIN memories m ON m.memory_id = j.value "
                        f"WHERE {where}", [json.dumps(memory_ids), *params]).fetchall()


def _matches(t: Terms) -> list[tuple[str, str, str]]:
    """(table, bm25 expression, MATCH query) for each shared index the terms can use."""
    found = [("memory_fts", "bm25(memory_fts, 1.0, 1.0)", word_query(t)),
             ("memory_fts_cjk", "bm25(memory_fts_cjk)", cjk_query(t))]
    return [(table, rank, f"{{content key}} : ({q})" if table == "memory_fts" else q)
            for table, rank, q in found if q is not None]


def _ranked(conn: apsw.Connection, columns: str, table: str, rank: str, match: str, scope: SearchScope,
            limit: int, row_to_memory) -> list[KeywordHit]:
    """The best `limit` rows of the scope for one MATCH, best first.

    Across owners FTS5 ranks first, on its own (a window of its best rowids), and only that
    window is joined to `memories` and filtered by the scope: joining every match before
    ranking read and sorted every matching row. A window the scope thins below `limit` is
    widened until FTS5 runs out. An owner's search joins every match to its row and ranks
    what the owner holds: FTS5's best rows overall are mostly other owners' (at 10k of 1M
    rows, a window would widen five times)."""
    if scope.api_key_id is not None:
        where, params = scope_clause(scope)
        rows = conn.execute(f"SELECT {columns}, -{rank} FROM {table} CROSS JOIN memories m "
                            f"ON m.memory_id = {table}.rowid WHERE {table} MATCH ? AND {where} "
                            f"ORDER BY {rank} LIMIT ?", [match, *params, limit]).fetchall()
        return [KeywordHit(row_to_memory(row[:-1]), float(row[-1])) for row in rows]
    window = limit
    while True:
        ranked = conn.execute(f"SELECT rowid, -{rank} FROM {table} WHERE {table} MATCH ? ORDER BY {rank} LIMIT ?",
                              (match, window)).fetchall()
        scores = dict(ranked)
        rows = rows_in_scope(conn, columns, list(scores), scope)
        if len(rows) >= limit or len(ranked) < window:
            break
        window *= 4
    rows.sort(key=lambda row: scores[row[1]], reverse=True)
    return [KeywordHit(row_to_memory(row), float(scores[row[1]])) for row in rows[:limit]]


def search(conn: apsw.Connection, columns: str, scope: SearchScope, text: str, limit: int,
           row_to_memory) -> list[KeywordHit]:
    """Best `limit` rows of the scope for `text`, from the word and the CJK postings, best
    first (FTS5's bm25, with the statistics of the whole index). `columns` must select
    m.memory_id second (as `_COLUMNS` does)."""
    t = terms(text)
    best: dict[str, KeywordHit] = {}
    for table, rank, match in _matches(t):
        for hit in _ranked(conn, columns, table, rank, match, scope, limit, row_to_memory):
            if hit.memory.id not in best or best[hit.memory.id].score < hit.score:
                best[hit.memory.id] = hit
    return sorted(best.values(), key=lambda h: h.score, reverse=True)[:limit]
