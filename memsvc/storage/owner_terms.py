"""Owner-prefixed keyword terms: the per-owner postings of the keyword index (migration 0005).

Why: in a shared FTS5 index a term's posting list holds every owner's rows, and FTS5 reads
the whole list of each query term before intersecting it with anything (bench/hot_path.py:
the same owner's keyword search took 0.25 ms in a database of 10k rows and 2.9 ms among 1M).
Here every indexed token carries its owner's tag (`k<16 hex>` + token), so a term's posting
list holds one owner's rows only and bm25's document frequencies are that owner's.

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
from typing import Iterable

import apsw

from memsvc.core.text import Terms, cjk_runs, ngrams

WORDS_FUNCTION = "memsvc_owner_words"
GRAMS_FUNCTION = "memsvc_owner_grams"
WORD_TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])
GRAM = 3


def owner_tag(api_key_id: str) -> str:
    digest = hashlib.blake2b(api_key_id.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return "k" + digest


def word_tokenizer(conn: apsw.Connection) -> apsw.FTS5Tokenizer:
    name, args = WORD_TOKENIZER
    return conn.fts5_tokenizer(name, args)


def _tokens(tokenizer: apsw.FTS5Tokenizer, text: str, flags: int) -> list[str]:
    return tokenizer(text.encode("utf-8", "surrogatepass"), flags, None, include_offsets=False,
                     include_colocated=False)


def _grams(text: str) -> list[str]:
    out: list[str] = []
    for run in cjk_runs(text):
        if len(run) >= GRAM:
            out += ngrams(run, GRAM)
    return out


def _prefixed(tag: str, tokens: Iterable[str]) -> str:
    return " ".join(tag + t for t in tokens)


def register(conn: apsw.Connection) -> None:
    """The SQL functions the index's triggers call; every connection that may write
    `memories` needs them (Database registers them on each connection it opens)."""
    tokenizer = word_tokenizer(conn)

    def words(api_key_id: str | None, text: str | None) -> str | None:
        if api_key_id is None or not text:
            return None
        return _prefixed(owner_tag(api_key_id), _tokens(tokenizer, text, apsw.FTS5_TOKENIZE_DOCUMENT))

    def grams(api_key_id: str | None, content: str | None, key: str | None) -> str | None:
        if api_key_id is None:
            return None
        found = _grams(content or "") + _grams(key or "")
        return _prefixed(owner_tag(api_key_id), found) if found else None

    conn.create_scalar_function(WORDS_FUNCTION, words, 2, deterministic=True)
    conn.create_scalar_function(GRAMS_FUNCTION, grams, 3, deterministic=True)


def _phrase(tag: str, tokens: list[str]) -> str:
    return '"' + " ".join(tag + t for t in tokens).replace('"', '""') + '"'


def word_query(tokenizer: apsw.FTS5Tokenizer, api_key_id: str, t: Terms) -> str | None:
    """The owner's query for the word columns: each query word tokenized as the documents
    were (one word may become a phrase, e.g. "e-mail"), quoted, ORed."""
    tag = owner_tag(api_key_id)
    phrases = []
    for word in t.words:
        tokens = _tokens(tokenizer, word, apsw.FTS5_TOKENIZE_QUERY)
        if tokens:
            phrase = _phrase(tag, tokens)
            if phrase not in phrases:
                phrases.append(phrase)
    return " OR ".join(phrases) or None


def gram_query(api_key_id: str, t: Terms) -> str | None:
    """The owner's query for the CJK column: every trigram of every CJK run of 3+ characters."""
    tag = owner_tag(api_key_id)
    phrases: list[str] = []
    for run in t.cjk_runs:
        if len(run) >= GRAM:
            phrases += [p for p in (_phrase(tag, [g]) for g in ngrams(run, GRAM)) if p not in phrases]
    return " OR ".join(phrases) or None
