"""Keyword search on PostgreSQL: the `search` tsvector of every memory (its content and key
through the `english` configuration, kept by the server as a generated column) and its GIN
index, ranked by BM25.

The query is never parsed from user text. `websearch_to_tsquery` and `plainto_tsquery` over
the whole text AND the words (one missing word and nothing is found) and give the user's
punctuation a meaning; here the words are the ones `memsvc.kernel.text.terms` gives (the same
words the relevance score above the store rewards), each becomes a tsquery of its own through
`plainto_tsquery('english', word)` (a bound parameter; that function has no operators, so
`C++`, `"`, `'`, `:*`, `&`, `|`, `!` or `(` are only text to it), and those tsqueries are
ORed: one matching word is enough. The OR is assembled by the server from the tsqueries'
own text form, which it prints quoted and parses back unchanged.

Ranking is BM25 (k1 = 1.2, b = 0.75, as FTS5's), because `ts_rank_cd` has no inverse
document frequency: it ranks a row holding a word every memory has as high as one holding
the rarest word of the query, where SQLite's bm25 puts the rare one first. The frequencies
are the scope owner's (every owner's for a scope across owners), as the SQLite path's
per-owner postings give: N = the owner's memories, n = those holding the word, idf =
max(log((N − n + 0.5) / (n + 0.5)), 1e-6); the row's length is its number of distinct
lexemes (`length(search)`), against the average of the owner's newest AVG_SAMPLE rows. Term
frequencies are read from the row's tsvector positions (a word the configuration splits
into several lexemes counts each, with the word's idf), for the rows the GIN index matched
inside the scope only. N, the average and n are counted at most once per `STATS_TTL_S` per
owner and word: they only need to be roughly right, and counting them costs a pass over the
owner's index entries. As on SQLite, a word held by more than a tenth of a large owner's
memories selects no candidates on its own when the query has rarer ones.

CJK text: the `english` configuration does not split scripts written without spaces, so a
run of CJK characters is indexed as one lexeme and the words of a question never match
inside it; `terms()` keeps such runs apart from the words, and they are not searched here
(a pg_trgm index over the content is the way to add them). The substring relevance that the
core computes above the store still scores CJK text of the candidates other tiers find.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from memsvc.kernel.cache import TtlCache
from memsvc.kernel.models import KeywordHit, SearchScope
from memsvc.kernel.text import terms
from memsvc.storage.postgres.rows import M_COLUMNS, row_to_memory, scope_clause
from memsvc.working_set.owner import BM25_B, BM25_K1, COMMON_MIN_DOCS, COMMON_SHARE

# How long an owner's document counts are reused: `selective` only needs to know roughly
# how common a word is.
STATS_TTL_S = 30.0
_MIN_IDF = 1e-6

# The ORed tsquery of the words: one tsquery per word (none for a word the english
# configuration drops as a stop word), joined by the server from their own text form.
_QUERY = (
    "(SELECT string_agg('(' || q::text || ')', ' | ')::tsquery FROM unnest(%s::text[]) AS t(word), "
    "LATERAL plainto_tsquery('english', t.word) AS q WHERE numnode(q) > 0)"
)
# A row's BM25: Σ idf·tf·(k1+1) / (tf + k1·(1−b) + k1·b·dl/avgdl) over the query's lexemes
# the row holds, tf = the lexeme's positions in the row's tsvector: one pass over the row's
# lexemes (a lexeme's idf is its word's, found by its place in the lexeme array).
_SCORE = (
    "(SELECT sum((%s::float8[])[array_position(%s::text[], u.lexeme)] * cardinality(u.positions) * %s"
    " / (cardinality(u.positions) + %s + %s * length(m.search))) FROM unnest(m.search) AS u"
    " WHERE u.lexeme = ANY(%s::text[]))"
)
# Per word: its lexemes and how many memories (of the owner) hold it.
_WORD_STATS = (
    "SELECT t.word, tsvector_to_array(to_tsvector('english', t.word)), CASE WHEN numnode(q) = 0 THEN 0 "
    "ELSE (SELECT count(*) FROM memories m WHERE m.search @@ q{owner}) END "
    "FROM unnest(%s::text[]) AS t(word), LATERAL plainto_tsquery('english', t.word) AS q"
)
# N, and the average row length over the newest AVG_SAMPLE rows (read through an index, so
# its cost does not grow with the owner's memories; an average needs no more).
AVG_SAMPLE = 1000
_CORPUS = (
    "SELECT (SELECT count(*) FROM memories m{owner}), (SELECT coalesce(avg(length(s.search)), 0) "
    "FROM (SELECT m.search FROM memories m{owner} ORDER BY {order} LIMIT %s) AS s)"
)


def stats_cache() -> TtlCache[Any]:
    """A cache for the corpus statistics BM25 reads, one per backend."""
    return TtlCache(max_entries=100_000, ttl_s=STATS_TTL_S)


def _corpus(conn: Any, owner: str | None, stats: TtlCache[Any]) -> tuple[int, float]:
    """(N, average row length) of the owner's memories (every owner's for None)."""

    def load() -> tuple[int, float]:
        params: list[Any]
        if owner is None:
            sql, params = _CORPUS.format(owner="", order="m.memory_id DESC"), [AVG_SAMPLE]
        else:
            sql = _CORPUS.format(owner=" WHERE m.api_key_id = %s", order="m.created_at DESC, m.memory_id DESC")
            params = [owner, owner, AVG_SAMPLE]
        count, avg = conn.execute(sql, params).fetchone()
        return int(count), float(avg)

    found = stats.get_or_load(("corpus", owner), load)
    assert found is not None  # load() always gives a value
    return int(found[0]), float(found[1])


def _word_stats(
    conn: Any, owner: str | None, words: Sequence[str], stats: TtlCache[Any]
) -> dict[str, tuple[int, tuple[str, ...]]]:
    """word → (how many of the owner's memories hold it, its lexemes); the uncached words
    counted in one statement (a GIN lookup of the word, then the owner's rows among them)."""
    found: dict[str, Any] = {w: stats.get(("word", owner, w)) for w in words}
    missing = [w for w, known in found.items() if known is None]
    if missing:
        where, params = (" AND m.api_key_id = %s", [owner]) if owner is not None else ("", [])
        for word, lexemes, n in conn.execute(_WORD_STATS.format(owner=where), [*params, missing]).fetchall():
            found[word] = (int(n), tuple(lexemes))
            stats.put(("word", owner, word), found[word])
    return found


def selective(words: list[str], df: dict[str, int], n_docs: int) -> list[str]:
    """The words that select candidates: a word in more than COMMON_SHARE of a large owner's
    memories (and more than COMMON_MIN_DOCS of them) carries almost no BM25 weight and would
    make every row holding it a candidate to score; it is left out when rarer words of the
    query match something (the rule of the SQLite path)."""
    if len(words) < 2:
        return words
    limit = max(COMMON_SHARE * n_docs, COMMON_MIN_DOCS)
    if n_docs <= limit:
        return words
    kept = [w for w in words if df[w] <= limit]
    return kept if any(df[w] > 0 for w in kept) else words


def idf(n_docs: int, n: int) -> float:
    """FTS5's inverse document frequency, floored at 1e-6 so a word in most rows still counts."""
    return max(math.log((n_docs - n + 0.5) / (n + 0.5)), _MIN_IDF)


def _lexeme_weights(
    words: Sequence[str], known: dict[str, tuple[int, tuple[str, ...]]], n_docs: int
) -> tuple[list[str], list[float]]:
    """The query's lexemes and each one's idf (its word's; the highest when two words share
    one)."""
    weights: dict[str, float] = {}
    for word in words:
        n, lexemes = known[word]
        for lexeme in lexemes:
            weights[lexeme] = max(weights.get(lexeme, 0.0), idf(n_docs, n))
    return list(weights), list(weights.values())


def search(conn: Any, scope: SearchScope, text: str, limit: int, stats: TtlCache[Any]) -> list[KeywordHit]:
    """The best `limit` memories of the scope for the words of `text`, best (highest BM25)
    first; ties newest memory_id first."""
    words = list(terms(text).words)
    if not words or limit <= 0:
        return []
    owner = scope.api_key_id
    n_docs, avgdl = _corpus(conn, owner, stats)
    known = _word_stats(conn, owner, words, stats)
    df = {w: n for w, (n, _) in known.items()}
    n_docs = max(n_docs, *df.values())  # counts cached at different moments
    words = selective(words, df, n_docs)
    lexemes, weights = _lexeme_weights(words, known, n_docs)
    if not lexemes:
        return []
    fixed, per_lexeme = BM25_K1 * (1 - BM25_B), BM25_K1 * BM25_B / max(avgdl, 1.0)
    where, params = scope_clause(scope)
    rows = conn.execute(
        f"SELECT {M_COLUMNS}, s.score FROM memories m, LATERAL {_SCORE} AS s(score) "
        f"WHERE m.search @@ {_QUERY} AND {where} ORDER BY s.score DESC, m.memory_id DESC LIMIT %s",
        [weights, lexemes, BM25_K1 + 1, fixed, per_lexeme, lexemes, words, *params, limit],
    ).fetchall()
    return [KeywordHit(row_to_memory(row[:-1]), float(row[-1] or 0.0)) for row in rows]


def probe(conn: Any) -> None:
    """A real match through the GIN index: the keyword tier's health, measured."""
    conn.execute(
        "SELECT count(*) FROM memories WHERE search @@ plainto_tsquery('english', %s)", ("memsvc_probe",)
    ).fetchone()
