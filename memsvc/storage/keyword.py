"""Keyword search over the FTS5 indexes (SQLite).

FTS5 query syntax is built here, not from raw user text: every term is quoted (with `"`
doubled), so `C++`, `Johnson & Johnson`, `parens(test)`, `asterisk*` or a lone `"` are
searched as words and never parsed as operators; terms are ORed so one matching word is
enough and bm25 ranks rows that match more of them higher.

This is the store's keyword search: what no working set answers (scope global, an owner
the working-set budget cannot hold, or a budget of 0) is searched here, over the shared
indexes, with the scope's filter.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from typing import Any, cast

import apsw

from memsvc.kernel.cache import TtlCache
from memsvc.kernel.models import KeywordHit, SearchScope
from memsvc.kernel.text import Terms, ngrams, terms
from memsvc.storage import dialect, owner_terms
from memsvc.storage.database import scalar
from memsvc.storage.memory_rows import M_COLUMNS, row_to_memory
from memsvc.working_set.owner import selective

#: How long a document count is reused (see `doc_counts`).
DOC_COUNT_TTL_S = 30.0
_ALL_ROWS = ("rows",)


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


#: The scope rule (`memsvc.storage.dialect.scope_clause`) in SQLite's syntax.
scope_clause = functools.partial(dialect.scope_clause, dialect.SQLITE_SQL)


def rows_in_scope(conn: apsw.Connection, columns: str, memory_ids: list[int], scope: SearchScope) -> list[Any]:
    """`columns` of the given memories (alias m) that are in the scope, in no order.

    The id list drives the join (CROSS JOIN fixes the order): written as `memory_id IN
    (...) AND api_key_id = ?`, SQLite walked the owner's whole index range instead (2 ms
    for 20 ids of an owner with 10k memories)."""
    where, params = scope_clause(scope)
    return conn.execute(
        f"SELECT {columns} FROM json_each(?) j CROSS JOIN memories m ON m.memory_id = j.value WHERE {where}",
        [json.dumps(memory_ids), *params],
    ).fetchall()


def owner_token(api_key_id: str) -> str:
    """The owner column's token for an owner (migration 0012: 'o' || hex(api_key_id) || '0',
    hex of the id's UTF-8 bytes, lower-cased as unicode61 folds it)."""
    return "o" + api_key_id.encode("utf-8", "surrogatepass").hex() + "0"


def _matches(t: Terms, owner: str | None) -> list[tuple[str, str, str]]:
    """(table, bm25 expression, MATCH query) for each shared index the terms can use. An
    owner's word search intersects the owner column's postings with the words' first."""
    words = word_query(t)
    if words is not None:
        words = f"{{content key}} : ({words})"
        if owner is not None:
            words = f"owner : {_quote(owner_token(owner))} AND {words}"
    found = [
        ("memory_fts", "bm25(memory_fts, 1.0, 1.0, 0.0)", words),
        ("memory_fts_cjk", "bm25(memory_fts_cjk)", cjk_query(t)),
    ]
    return [(table, rank, q) for table, rank, q in found if q is not None]


def _ranked(
    conn: apsw.Connection, table: str, rank: str, match: str, scope: SearchScope, limit: int
) -> list[KeywordHit]:
    """The best `limit` rows of the scope for one MATCH, best first.

    FTS5 ranks first, on its own (a window of its best rowids), and only that window is
    joined to `memories` and filtered by the scope: joining every match before ranking read
    and sorted every matching row. A window the scope thins below `limit` is widened until
    FTS5 runs out. The CJK trigram index has no owner column: an owner's search there joins
    every match to its row and ranks what the owner holds (FTS5's best rows overall would
    mostly be other owners'; CJK matches are few)."""
    if scope.api_key_id is not None and table == "memory_fts_cjk":
        where, params = scope_clause(scope)
        rows = conn.execute(
            f"SELECT {M_COLUMNS}, -{rank} FROM {table} CROSS JOIN memories m "
            f"ON m.memory_id = {table}.rowid WHERE {table} MATCH ? AND {where} "
            f"ORDER BY {rank} LIMIT ?",
            [match, *params, limit],
        ).fetchall()
        return [KeywordHit(row_to_memory(row[:-1]), float(cast(float, row[-1]))) for row in rows]
    window = limit
    while True:
        ranked = conn.execute(
            f"SELECT rowid, -{rank} FROM {table} WHERE {table} MATCH ? ORDER BY {rank} LIMIT ?", (match, window)
        ).fetchall()
        scores: dict[Any, float] = {rowid: float(cast(float, score)) for rowid, score in ranked}
        rows = rows_in_scope(conn, M_COLUMNS, list(scores), scope)
        if len(rows) >= limit or len(ranked) < window:
            break
        window *= 4
    rows.sort(key=lambda row: scores[row[1]], reverse=True)
    return [KeywordHit(row_to_memory(row), float(scores[row[1]])) for row in rows[:limit]]


def doc_counts() -> TtlCache[int]:
    """A cache of the shared word index's document counts, one per database. FTS5 counts a
    term's documents by walking its postings (16 ms for a word in a third of 1M rows), and
    `selective` only needs to know roughly how common a word is: a count up to
    DOC_COUNT_TTL_S old does."""
    return TtlCache(max_entries=100_000, ttl_s=DOC_COUNT_TTL_S)


def _selective(conn: apsw.Connection, t: Terms, counts: TtlCache[int]) -> Terms:
    """`t` without the words too common in the whole index to select anything (the working
    sets' rule, `memsvc.working_set.owner.selective`, with the index's counts): "prefer" in a
    third of 1M facts made FTS5 read and intersect 353k postings for every such query."""
    if len(t.words) < 2:
        return t
    tokenizer = owner_terms.word_tokenizer(conn)
    phrases = [owner_terms.tokens(tokenizer, word, apsw.FTS5_TOKENIZE_QUERY) for word in t.words]

    def rows() -> int:
        return counts.get_or_load(_ALL_ROWS, lambda: int(scalar(conn, "SELECT count(*) FROM memories"))) or 0

    def df(token: str) -> int:
        def read() -> int:
            found = conn.execute("SELECT doc FROM memory_fts_vocab WHERE term = ?", (token,)).fetchone()
            return int(found[0]) if found else 0

        return counts.get_or_load(token, read) or 0

    kept = {id(p) for p in selective(phrases, rows, df)}
    return replace(t, words=tuple(w for w, p in zip(t.words, phrases) if id(p) in kept))


def search(conn: apsw.Connection, scope: SearchScope, text: str, limit: int, counts: TtlCache[int]) -> list[KeywordHit]:
    """Best `limit` rows of the scope for `text`, from the word and the CJK postings, best
    first (FTS5's bm25, with the statistics of the whole index), searched without the words
    too common to select anything, and with every word when the others find nothing in the
    scope. `counts` is the database's `doc_counts()`."""
    t = terms(text)
    narrowed = _selective(conn, t, counts)
    found = _search(conn, scope, narrowed, limit)
    if not found and narrowed != t:
        found = _search(conn, scope, t, limit)
    return found


def _search(conn: apsw.Connection, scope: SearchScope, t: Terms, limit: int) -> list[KeywordHit]:
    best: dict[str, KeywordHit] = {}
    for table, rank, match in _matches(t, scope.api_key_id):
        for hit in _ranked(conn, table, rank, match, scope, limit):
            if hit.memory.id not in best or best[hit.memory.id].score < hit.score:
                best[hit.memory.id] = hit
    return sorted(best.values(), key=lambda h: h.score, reverse=True)[:limit]
