"""Keyword search over the FTS5 indexes, and the scope filter retrieval shares.

FTS5 query syntax is built here, not from raw user text: every term is quoted (with `"`
doubled), so `C++`, `Johnson & Johnson`, `parens(test)`, `asterisk*` or a lone `"` are
searched as words and never parsed as operators; terms are ORed so one matching word is
enough and bm25 ranks rows that match more of them higher.
"""

from __future__ import annotations

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
    """WHERE fragments for ENGINE.md §5 step 2, on table alias `alias`."""
    clauses = [f"({alias}.expires_at IS NULL OR {alias}.expires_at > ?)"]
    params: list[Any] = [iso(scope.now)]
    if scope.api_key_id is not None:
        clauses.append(f"{alias}.api_key_id = ?")
        params.append(scope.api_key_id)
    if scope.session_only:
        clauses.append(f"{alias}.session_id IS ?")
        params.append(scope.session_id)
    if scope.created_after is not None:
        clauses.append(f"{alias}.created_at >= ?")
        params.append(iso(scope.created_after))
    return " AND ".join(clauses), params


def owner_token(api_key_id: str) -> str:
    """The `owner` column's token of migration 0004 ('o' || hex(api_key_id) || '0')."""
    return "o" + api_key_id.encode("utf-8", "surrogatepass").hex().upper() + "0"


def search(conn: apsw.Connection, columns: str, scope: SearchScope, text: str, limit: int,
           row_to_memory) -> list[KeywordHit]:
    """Best `limit` rows of the scope for `text`, from both indexes, best first.

    The FTS5 table drives the join (CROSS JOIN fixes the order): with `memories` outside,
    SQLite walked the owner's rows and ran the whole MATCH once per row (seconds for an owner
    of 10k memories). The word index is narrowed to the owner inside the MATCH itself
    (migration 0004), so other owners' rows are never ranked nor joined."""
    t = terms(text)
    where, params = scope_clause(scope)
    best: dict[str, KeywordHit] = {}
    owner = scope.api_key_id
    for table, query in (("memory_fts", word_query(t)), ("memory_fts_cjk", cjk_query(t))):
        if query is None:
            continue
        rank = f"bm25({table})"
        if table == "memory_fts":
            rank = "bm25(memory_fts, 1.0, 1.0, 0.0)"
            if owner is not None:
                query = f"owner : {_quote(owner_token(owner))} AND {{content key}} : ({query})"
            else:
                query = f"{{content key}} : ({query})"
        sql = (f"SELECT {columns}, -{rank} FROM {table} CROSS JOIN memories m ON m.memory_id = {table}.rowid "
               f"WHERE {table} MATCH ? AND {where} ORDER BY {rank} LIMIT ?")
        for row in conn.execute(sql, [query, *params, limit]):
            hit = KeywordHit(row_to_memory(row[:-1]), float(row[-1]))
            if hit.memory.id not in best or best[hit.memory.id].score < hit.score:
                best[hit.memory.id] = hit
    return sorted(best.values(), key=lambda h: h.score, reverse=True)[:limit]
