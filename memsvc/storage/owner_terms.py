"""Owner-prefixed keyword terms: the per-owner postings of the keyword index (migration 0005).

Why: in a shared FTS5 index a term's posting list holds every owner's rows, and FTS5 reads
the whole list of each query term before intersecting it with anything (bench/hot_path.py:
the same owner's keyword search took 0.25 ms in a database of 10k rows and 2.9 ms among 1M).
Here every indexed token carries its owner's tag (`k<16 hex>` + token), so a term's posting
list holds one owner's rows only and bm25's document frequencies are that owner's (its row
count is every owner's: the word search scores FTS5's best rows again with the owner's own,
`owner_idf` and `owner_bm25`).

The words are what FTS5's own `porter unicode61 remove_diacritics 2` tokenizer produces (the
C tokenizer, called through apsw), so stemming and folding match the shared index exactly;
the index table re-tokenizes the prefixed words with plain `unicode61`, which leaves each
one whole. CJK text gets the trigrams of its CJK runs (the unit the trigram index searched).

The tag is a 64-bit hash, not the id itself, so every tag has the same length and no
(owner, token) pair can read as another; two owners whose tags collide only share postings,
and the search's `api_key_id = ?` check still keeps their rows apart.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Iterable

import apsw

from memsvc.core.cache import TtlCache
from memsvc.core.text import Terms, ngrams
from memsvc.working_set import owner
from memsvc.working_set.owner import BM25_B, BM25_K1, GRAM, grams as cjk_grams

WORDS_FUNCTION = "memsvc_owner_words"
GRAMS_FUNCTION = "memsvc_owner_grams"
TAG_FUNCTION = "memsvc_owner_tag"
BM25_FUNCTION = "memsvc_owner_bm25"
WORD_TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])
# How long a document count is reused (see `doc_counts`).
DOC_COUNT_TTL_S = 30.0


def owner_tag(api_key_id: str) -> str:
    digest = hashlib.blake2b(api_key_id.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return "k" + digest


def word_tokenizer(conn: apsw.Connection) -> apsw.FTS5Tokenizer:
    name, args = WORD_TOKENIZER
    return conn.fts5_tokenizer(name, args)


def tokens(tokenizer: apsw.FTS5Tokenizer, text: str, flags: int) -> list[str]:
    return tokenizer(text.encode("utf-8", "surrogatepass"), flags, None, include_offsets=False,
                     include_colocated=False)


def _prefixed(tag: str, tokens: Iterable[str]) -> str:
    return " ".join(tag + t for t in tokens)


def register(conn: apsw.Connection) -> None:
    """The SQL functions the index's triggers call; every connection that may write
    `memories` needs them (Database registers them on each connection it opens)."""
    tokenizer = word_tokenizer(conn)

    def words(api_key_id: str | None, text: str | None) -> str | None:
        if api_key_id is None or not text:
            return None
        return _prefixed(owner_tag(api_key_id), tokens(tokenizer, text, apsw.FTS5_TOKENIZE_DOCUMENT))

    def grams(api_key_id: str | None, content: str | None, key: str | None) -> str | None:
        if api_key_id is None:
            return None
        found = cjk_grams(content or "") + cjk_grams(key or "")
        return _prefixed(owner_tag(api_key_id), found) if found else None

    def tag(api_key_id: str | None) -> str | None:
        return None if api_key_id is None else owner_tag(api_key_id)

    conn.register_fts5_function(BM25_FUNCTION, owner_bm25)
    conn.create_scalar_function(WORDS_FUNCTION, words, 2, deterministic=True)
    conn.create_scalar_function(GRAMS_FUNCTION, grams, 3, deterministic=True)
    conn.create_scalar_function(TAG_FUNCTION, tag, 1, deterministic=True)


def _phrase(tag: str, tokens: list[str]) -> str:
    return '"' + " ".join(tag + t for t in tokens).replace('"', '""') + '"'


def word_phrases(conn: apsw.Connection, tokenizer: apsw.FTS5Tokenizer, api_key_id: str, t: Terms,
                 counts: TtlCache[int]) -> list[list[str]]:
    """The owner's query phrases for the word columns: each query word tokenized as the
    documents were (one word may become a phrase, e.g. "e-mail"), without the words too
    common among the owner's memories to select anything (`selective`)."""
    tag = owner_tag(api_key_id)
    phrases: list[list[str]] = []
    for word in t.words:
        found = tokens(tokenizer, word, apsw.FTS5_TOKENIZE_QUERY)
        if found and found not in phrases:
            phrases.append(found)
    return selective(conn, tag, phrases, counts)


def phrase_query(api_key_id: str, phrases: list[list[str]]) -> str | None:
    """The owner's MATCH text for `phrases`: each one tagged, quoted, ORed."""
    tag = owner_tag(api_key_id)
    return " OR ".join(_phrase(tag, p) for p in phrases) or None


def owner_idf(conn: apsw.Connection, api_key_id: str, phrases: list[list[str]], counts: TtlCache[int]) -> str | None:
    """Each phrase's inverse document frequency among the owner's memories, as FTS5 computes
    it (log((N − n + 0.5) / (n + 0.5)), at least 1e-6) but with N the owner's number of
    memories instead of every owner's: FTS5's bm25 counts N over the whole index, which
    gives a word in most of this owner's memories (a chat partner's name) almost the
    weight of a rare one. A phrase of several tokens counts as its rarest token. JSON, for
    `owner_bm25`; None while the owner's count reads 0 (a count cached before its first
    memory), when FTS5's own bm25 ranks instead."""
    tag = owner_tag(api_key_id)
    owned = doc_count(conn, tag, counts)
    if owned <= 0:
        return None
    out = []
    for phrase in phrases:
        n = min(owned, min(doc_count(conn, tag + token, counts) for token in phrase))
        out.append(owner.idf(owned, n))
    return json.dumps(out)


def owner_bm25(api: apsw.FTS5ExtensionApi, idf_json: str) -> float:
    """FTS5's bm25 of a row over the word columns (same k1, b, row length and average
    length), with the owner's idf per phrase (`owner_idf`); higher is better. What is the
    same for every row of the query (the weights, the average length) is read once, into
    the query's aux data: this runs in Python for each row FTS5's sort keeps."""
    ctx = api.aux_data
    if ctx is None:
        avgdl = max(api.column_total_size(-1) / max(api.row_count, 1), 1e-9)
        ctx = api.aux_data = (json.loads(idf_json)[:api.phrase_count], BM25_K1 * (1 - BM25_B), BM25_K1 * BM25_B / avgdl)
    idf, fixed, per_token = ctx
    norm = fixed + per_token * api.column_size(-1)
    score = 0.0
    for i, weight in enumerate(idf):
        found = api.phrase_locations(i)
        tf = len(found[0]) + len(found[1])  # the word columns, content and key
        if tf:
            score += weight * tf * (BM25_K1 + 1) / (tf + norm)
    return score


def doc_counts() -> TtlCache[int]:
    """A cache for `doc_count`, one per database. The vocabulary counts a term's documents
    by walking its postings (0.16 ms for a word of an owner with 10k memories, five of them
    per query), and `selective` only needs to know roughly how common a word is: a count
    up to DOC_COUNT_TTL_S old does."""
    return TtlCache(max_entries=100_000, ttl_s=DOC_COUNT_TTL_S)


def doc_count(conn: apsw.Connection, term: str, counts: TtlCache[int]) -> int:
    """How many rows of the owner index hold `term` (a tagged token, or a tag alone: the
    owner's number of memories)."""
    def read() -> int:
        row = conn.execute("SELECT doc FROM memory_owner_vocab WHERE term = ?", (term,)).fetchone()
        return int(row[0]) if row else 0

    return counts.get_or_load(term, read) or 0


def selective(conn: apsw.Connection, tag: str, phrases: list[list[str]], counts: TtlCache[int]) -> list[list[str]]:
    """The phrases that select candidates (memsvc.working_set.owner.selective), with the
    owner's counts from the vocabulary. Such a word matched 40 % of an owner's 10k rows, and
    bm25 read a row's length for each: 8 ms of a query's 9."""
    return owner.selective(phrases, lambda: doc_count(conn, tag, counts),
                           lambda token: doc_count(conn, tag + token, counts))


def gram_query(api_key_id: str, t: Terms) -> str | None:
    """The owner's query for the CJK column: every trigram of every CJK run of 3+ characters."""
    tag = owner_tag(api_key_id)
    phrases: list[str] = []
    for run in t.cjk_runs:
        if len(run) >= GRAM:
            phrases += [p for p in (_phrase(tag, [g]) for g in ngrams(run, GRAM)) if p not in phrases]
    return " OR ".join(phrases) or None
