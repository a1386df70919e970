"""An independent reference for the working sets' keyword ranking: FTS5 itself.

The working set (memsvc/working_set/owner.py) computes an owner's BM25 in NumPy. This oracle
indexes the same database's memories in an FTS5 table of its own, one owner's tagged tokens
per row (what migration 0005 kept in the store until 0012 dropped it), and ranks a query with
FTS5's bm25 machinery (term frequencies, row lengths, the average length) and the owner's
own document frequencies as the idf. The tests install it on a database and compare.

Only for tests: installing it puts a Python tokenizer in a trigger on `memories`.
"""

from __future__ import annotations

import json

import apsw

from memsvc.kernel.models import KeywordHit, SearchScope
from memsvc.kernel.text import ngrams, terms
from memsvc.storage import keyword
from memsvc.storage.owner_terms import owner_tag, tokens, word_tokenizer
from memsvc.working_set import owner as ws
from memsvc.working_set.owner import BM25_B, BM25_K1, GRAM

BM25_FUNCTION = "oracle_owner_bm25"

_SCHEMA = """
CREATE VIRTUAL TABLE oracle_owner_fts USING fts5(content, key, grams, owner, content = '',
    contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 0');
CREATE VIRTUAL TABLE oracle_owner_vocab USING fts5vocab(oracle_owner_fts, row);
CREATE TRIGGER oracle_owner_fts_ai AFTER INSERT ON memories BEGIN
    INSERT INTO oracle_owner_fts (rowid, content, key, grams, owner)
    VALUES (new.memory_id, memsvc_owner_words(new.api_key_id, new.content), memsvc_owner_words(new.api_key_id, new.key),
            memsvc_owner_grams(new.api_key_id, new.content, new.key), memsvc_owner_tag(new.api_key_id));
END;
CREATE TRIGGER oracle_owner_fts_ad AFTER DELETE ON memories BEGIN
    DELETE FROM oracle_owner_fts WHERE rowid = old.memory_id;
END;
CREATE TRIGGER oracle_owner_fts_au AFTER UPDATE ON memories
WHEN old.content IS NOT new.content OR old.key IS NOT new.key OR old.api_key_id IS NOT new.api_key_id BEGIN
    DELETE FROM oracle_owner_fts WHERE rowid = old.memory_id;
    INSERT INTO oracle_owner_fts (rowid, content, key, grams, owner)
    VALUES (new.memory_id, memsvc_owner_words(new.api_key_id, new.content), memsvc_owner_words(new.api_key_id, new.key),
            memsvc_owner_grams(new.api_key_id, new.content, new.key), memsvc_owner_tag(new.api_key_id));
END;
"""


def install(conn: apsw.Connection) -> None:
    """Create the oracle's index on this (empty) database; every later write feeds it."""
    conn.execute(_SCHEMA)


def _bm25(api: apsw.FTS5ExtensionApi, idf_json: str) -> float:
    """FTS5's bm25 of a row over the word columns, with the owner's idf per phrase."""
    if api.aux_data is None:
        avgdl = max(api.column_total_size(-1) / max(api.row_count, 1), 1e-9)
        api.aux_data = (json.loads(idf_json)[: api.phrase_count], BM25_K1 * (1 - BM25_B), BM25_K1 * BM25_B / avgdl)
    idf, fixed, per_token = api.aux_data
    norm = fixed + per_token * api.column_size(-1)
    score = 0.0
    for i, weight in enumerate(idf):
        found = api.phrase_locations(i)
        tf = len(found[0]) + len(found[1])
        if tf:
            score += weight * tf * (BM25_K1 + 1) / (tf + norm)
    return score


def _doc(conn: apsw.Connection, term: str) -> int:
    row = conn.execute("SELECT doc FROM oracle_owner_vocab WHERE term = ?", (term,)).fetchone()
    return int(row[0]) if row else 0


def _quoted(tag: str, phrase: list[str]) -> str:
    return '"' + " ".join(tag + t for t in phrase).replace('"', '""') + '"'


def _ranked(
    conn: apsw.Connection,
    columns: str,
    score: str,
    rank: str,
    match: str,
    params: list,
    scope: SearchScope,
    row_to_memory,
) -> list[KeywordHit]:
    found = dict(
        conn.execute(
            f"SELECT rowid, {score} FROM oracle_owner_fts WHERE oracle_owner_fts MATCH ? ORDER BY {rank}",
            [*params, match],
        ).fetchall()
    )
    rows = keyword.rows_in_scope(conn, columns, list(found), scope)
    return [KeywordHit(row_to_memory(row), float(found[row[1]])) for row in rows]


def search(conn: apsw.Connection, columns: str, scope: SearchScope, text: str, row_to_memory) -> list[KeywordHit]:
    """Every row of the scope's owner that `text` matches, with its score, best first."""
    conn.register_fts5_function(BM25_FUNCTION, _bm25)
    assert scope.api_key_id is not None
    tag, t = owner_tag(scope.api_key_id), terms(text)
    tokenizer = word_tokenizer(conn)
    phrases: list[list[str]] = []
    for word in t.words:
        found = tokens(tokenizer, word, apsw.FTS5_TOKENIZE_QUERY)
        if found and found not in phrases:
            phrases.append(found)
    owned = _doc(conn, tag)
    phrases = ws.selective(phrases, lambda: owned, lambda token: _doc(conn, tag + token))
    best: dict[str, KeywordHit] = {}
    hits: list[KeywordHit] = []
    if phrases and owned > 0:
        idf = json.dumps([ws.idf(owned, min(owned, min(_doc(conn, tag + tok) for tok in p))) for p in phrases])
        match = "{content key} : (" + " OR ".join(_quoted(tag, p) for p in phrases) + ")"
        hits += _ranked(
            conn,
            columns,
            f"{BM25_FUNCTION}(oracle_owner_fts, ?)",
            "bm25(oracle_owner_fts, 1.0, 1.0, 0.0, 0.0)",
            match,
            [idf],
            scope,
            row_to_memory,
        )
    grams: list[str] = []
    for run in t.cjk_runs:
        if len(run) >= GRAM:
            grams += [g for g in (_quoted(tag, [g]) for g in ngrams(run, GRAM)) if g not in grams]
    if grams:
        rank = "bm25(oracle_owner_fts, 0.0, 0.0, 1.0, 0.0)"
        hits += _ranked(
            conn, columns, f"-{rank}", rank, "grams : (" + " OR ".join(grams) + ")", [], scope, row_to_memory
        )
    for hit in hits:
        if hit.memory.id not in best or best[hit.memory.id].score < hit.score:
            best[hit.memory.id] = hit
    return sorted(best.values(), key=lambda h: h.score, reverse=True)
