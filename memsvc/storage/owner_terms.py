"""The keyword tokens of a memory as the store's word index makes them, for the working sets.

The working sets (memsvc/working_set/) rank an owner's keyword search in memory; their
words must be what FTS5's own `porter unicode61 remove_diacritics 2` tokenizer produces (the
C tokenizer, called through apsw), so that stemming and folding are those of the shared
index the store searches when no working set answers.

Migration 0005 once kept per-owner postings in a second FTS5 table fed by triggers that
called the SQL functions registered here; 0012 dropped that table and its triggers. A
database older than 0005 still runs 0005's backfill on its way to 0012, so every connection
keeps the functions registered.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, cast

import apsw

from memsvc.working_set.owner import grams as cjk_grams

WORDS_FUNCTION = "memsvc_owner_words"
GRAMS_FUNCTION = "memsvc_owner_grams"
TAG_FUNCTION = "memsvc_owner_tag"
WORD_TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])


def owner_tag(api_key_id: str) -> str:
    """The 64-bit hash 0005 prefixed an owner's tokens with (every tag has one length, so no
    (owner, token) pair can read as another)."""
    digest = hashlib.blake2b(api_key_id.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return "k" + digest


def word_tokenizer(conn: apsw.Connection) -> apsw.FTS5Tokenizer:
    name, args = WORD_TOKENIZER
    return conn.fts5_tokenizer(name, args)


def tokens(tokenizer: apsw.FTS5Tokenizer, text: str, flags: int) -> list[str]:
    return cast(
        list[str],
        tokenizer(text.encode("utf-8", "surrogatepass"), flags, None, include_offsets=False, include_colocated=False),
    )


def _prefixed(tag: str, tokens: Iterable[str]) -> str:
    return " ".join(tag + t for t in tokens)


def register(conn: apsw.Connection) -> None:
    """The SQL functions migration 0005's triggers and backfill call (Database registers
    them on each connection it opens; see the module docstring)."""
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

    for name, function, arity in ((WORDS_FUNCTION, words, 2), (GRAMS_FUNCTION, grams, 3), (TAG_FUNCTION, tag, 1)):
        conn.create_scalar_function(name, cast(Any, function), arity, deterministic=True)
