"""One owner's working set: its memories, their keyword postings with BM25 statistics, and
the filter columns a retrieval scope reads, so a keyword search is arithmetic over arrays.

What it computes is the store's per-owner keyword search (memsvc.storage.keyword), with
every matching row scored instead of a window the shared index picked first:

- words: FTS5's porter/unicode61 tokens of content and key (the tokenizer is handed in, so
  stemming and folding are the store's own); each query word is a phrase of its tokens; a
  row matches when a phrase occurs in its content or key; its score is BM25 (k1 1.2, b 0.75)
  with the owner's own document frequencies, row count and average row length. A phrase of
  several tokens ("e-mail") counts as its rarest token. Words held by most of a large
  owner's rows select nothing on their own (`selective`, Elasticsearch's "common terms").
- CJK: the trigrams of each CJK run of content and key, scored the same way (a query's
  trigrams are its phrases).
- A row's length is what the store's index counts for it: its word tokens, its trigrams
  and its owner tag.

A row's score is the better of the two. Memories are immutable values, so a search hands
out the objects the set holds.
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

import numpy as np

from memsvc.kernel.models import KeywordHit, Memory, SearchScope
from memsvc.kernel.text import CJK_CHAR, cjk_runs, ngrams, terms
from memsvc.kernel.time_phrases import TimeWindow

BM25_K1, BM25_B = 1.2, 0.75
GRAM = 3
# A query word in more than COMMON_SHARE of the owner's memories, and in more than
# COMMON_MIN_DOCS of them, selects no candidates on its own (see `selective`).
COMMON_SHARE = 0.1
COMMON_MIN_DOCS = 500
_NO_EXPIRY = np.iinfo(np.int64).max
_NO_SESSION = -1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Text with none of these characters has no CJK run, before or after NFKC (which maps
# half-width katakana, U+FF65..U+FF9F, into the CJK range): most rows skip the run search.
_MAYBE_CJK = re.compile(f"[{CJK_CHAR}\uff65-\uff9f]")
# What one posting (with its share of the row's token tuples) and one memory (with its folded
# text) take, measured with tracemalloc on bench/working_set_bench.py's owner of 10k facts:
# 186 and 1,600 bytes. The budget counts these estimates.
_POSTING_BYTES = 190
_MEMORY_BYTES = 1600

P = TypeVar("P", list[str], tuple[str, ...])
#: text -> tokens, as the store's keyword index tokenizes a document (or a query word).
Tokenizer = Callable[[str], list[str]]


def micros(dt: datetime | None, default: int) -> int:
    """A timestamp as integer microseconds since the epoch (the store keeps microseconds)."""
    if dt is None:
        return default
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def idf(rows: int, hits: int) -> float:
    """FTS5's inverse document frequency: log((N − n + 0.5) / (n + 0.5)), at least 1e-6."""
    return max(math.log((rows - hits + 0.5) / (hits + 0.5)), 1e-6)


def selective(phrases: list[P], owned: Callable[[], int], df: Callable[[str], int]) -> list[P]:
    """The query phrases that select candidates, given the owner's row count and a token's
    document frequency. A word held by a large share of the owner's memories ("prefer"
    among facts that mostly read "User prefers …") carries almost no bm25 weight and still
    counts in the relevance score of every candidate the other words select (Elasticsearch's
    "common terms" rule). When the other words select nothing, the common ones are all the
    query has, and they all stay. A phrase of several tokens has no single document count:
    it always stays."""
    if len(phrases) < 2:
        return phrases
    rows = owned()
    limit = max(COMMON_SHARE * rows, COMMON_MIN_DOCS)
    if rows <= limit:
        return phrases
    found = [df(p[0]) if len(p) == 1 else None for p in phrases]
    kept = [(p, n) for p, n in zip(phrases, found) if n is None or n <= limit]
    if not any(n is None or n > 0 for _, n in kept):
        return phrases
    return [p for p, _ in kept]


def grams(text: str) -> list[str]:
    """The trigrams of each CJK run of three or more characters: the keyword unit of text
    written without spaces."""
    if not _MAYBE_CJK.search(text):
        return []
    out: list[str] = []
    for run in cjk_runs(text):
        if len(run) >= GRAM:
            out += ngrams(run, GRAM)
    return out


@dataclass(frozen=True)
class _Doc:
    words: tuple[tuple[str, ...], tuple[str, ...]]  # content tokens, key tokens
    grams: tuple[str, ...]


class _Postings:
    """term -> {slot: term frequency}, with each term's arrays built when a query first
    needs them and dropped when the term's rows change."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[int, int]] = {}
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.entries = 0

    def add(self, slot: int, tokens: Iterable[str]) -> None:
        counts = Counter(tokens)
        rows, arrays = self.rows, self._arrays
        for token, tf in counts.items():
            found = rows.get(token)
            if found is None:
                rows[token] = {slot: tf}
            else:
                found[slot] = tf
            if arrays:
                arrays.pop(token, None)
        self.entries += len(counts)

    def remove(self, slot: int, tokens: Iterable[str]) -> None:
        for token in set(tokens):
            found = self.rows.get(token)
            if found is not None and found.pop(slot, None) is not None:
                self.entries -= 1
                self._arrays.pop(token, None)
                if not found:
                    del self.rows[token]

    def df(self, token: str) -> int:
        return len(self.rows.get(token, ()))

    def arrays(self, token: str) -> tuple[np.ndarray, np.ndarray]:
        """(slots, term frequencies) of the rows holding `token`."""
        found = self._arrays.get(token)
        if found is None:
            rows = self.rows.get(token, {})
            found = (
                np.fromiter(rows.keys(), dtype=np.int64, count=len(rows)),
                np.fromiter(rows.values(), dtype=np.float64, count=len(rows)),
            )
            self._arrays[token] = found
        return found


def _occurrences(tokens: Sequence[str], phrase: Sequence[str]) -> int:
    """How often `phrase` occurs as consecutive tokens of `tokens`."""
    n = len(phrase)
    return sum(1 for i in range(len(tokens) - n + 1) if tuple(tokens[i : i + n]) == tuple(phrase))


class OwnerSet:
    """The working set of one owner. Not thread-safe: the registry serializes access."""

    def __init__(self, owner: str, tokenize_document: Tokenizer, tokenize_query: Tokenizer, capacity: int = 64) -> None:
        self.owner = owner
        self._tokenize_document = tokenize_document
        self._tokenize_query = tokenize_query
        self.version = 0
        self._slots: dict[int, int] = {}  # memory_id -> slot
        self._memories: list[Memory | None] = []
        self._docs: list[_Doc | None] = []
        self._words = _Postings()
        self._gram_postings = _Postings()
        self._total_length = 0
        self._session_codes: dict[str | None, int] = {None: _NO_SESSION}
        capacity = max(16, capacity)
        self._alive = np.zeros(capacity, dtype=bool)
        self._length = np.zeros(capacity, dtype=np.float64)
        self._created = np.zeros(capacity, dtype=np.int64)
        self._expires = np.full(capacity, _NO_EXPIRY, dtype=np.int64)
        self._keep = np.zeros(capacity, dtype=bool)
        self._session = np.full(capacity, _NO_SESSION, dtype=np.int32)
        self._happened = np.zeros(capacity, dtype=np.int64)
        self._memory_id = np.full(capacity, -1, dtype=np.int64)
        self._type = np.zeros(capacity, dtype=np.int32)
        self._type_codes: dict[str, int] = {}

    # -- size and contents -----------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._slots)

    @property
    def nbytes(self) -> int:
        """An estimate of the memory the set holds (what the registry's budget counts)."""
        arrays = sum(
            a.nbytes
            for a in (
                self._alive,
                self._length,
                self._created,
                self._expires,
                self._keep,
                self._session,
                self._happened,
                self._memory_id,
                self._type,
            )
        )
        postings = (self._words.entries + self._gram_postings.entries) * _POSTING_BYTES
        return arrays + postings + len(self._memories) * _MEMORY_BYTES + sys.getsizeof(self._slots)

    # -- writes ------------------------------------------------------------------------------

    @classmethod
    def build(
        cls, owner: str, memories: Sequence[Memory], tokenize_document: Tokenizer, tokenize_query: Tokenizer
    ) -> OwnerSet:
        """The set of these memories, its columns filled in one pass each (a build reads an
        owner's every row, so it is the cold search's cost)."""
        built = cls(owner, tokenize_document, tokenize_query, capacity=len(memories) + len(memories) // 8)
        lengths = [built._index(slot, memory) for slot, memory in enumerate(memories)]
        n = len(memories)
        codes = built._session_codes
        built._alive[:n] = True
        built._length[:n] = lengths
        built._created[:n] = [micros(m.created_at, 0) for m in memories]
        built._expires[:n] = [micros(m.expires_at, _NO_EXPIRY) for m in memories]
        built._keep[:n] = [m.keep for m in memories]
        built._session[:n] = [codes.setdefault(m.session_id, len(codes)) for m in memories]
        built._happened[:n] = [micros(m.happened_at, 0) for m in memories]
        built._memory_id[:n] = [m.memory_id for m in memories]
        types = built._type_codes
        built._type[:n] = [types.setdefault(m.type, len(types)) for m in memories]
        return built

    def put(self, memory: Memory) -> None:
        """Add a memory, or replace the version the set holds. A version whose indexed text
        is unchanged (the access counters a Retrieve records, a new expiry or session) keeps
        its slot and postings: only its columns are written."""
        slot = self._slots.get(memory.memory_id)
        held = None if slot is None else self._memories[slot]
        if slot is not None and held is not None and held.content == memory.content and held.key == memory.key:
            self._memories[slot] = memory
            self._set_columns(slot, memory)
            return
        self.discard(memory.memory_id)
        slot = len(self._memories)
        if slot >= len(self._alive):
            self._grow()
        self._length[slot] = self._index(slot, memory)
        self._alive[slot] = True
        self._set_columns(slot, memory)

    def _set_columns(self, slot: int, memory: Memory) -> None:
        self._created[slot] = micros(memory.created_at, 0)
        self._expires[slot] = micros(memory.expires_at, _NO_EXPIRY)
        self._keep[slot] = memory.keep
        self._session[slot] = self._session_codes.setdefault(memory.session_id, len(self._session_codes))
        self._happened[slot] = micros(memory.happened_at, 0)
        self._memory_id[slot] = memory.memory_id
        self._type[slot] = self._type_codes.setdefault(memory.type, len(self._type_codes))

    def _index(self, slot: int, memory: Memory) -> int:
        """Tokenize a memory into `slot` (which must be the next one) and return its length."""
        doc = _Doc(
            (
                tuple(self._tokenize_document(memory.content)) if memory.content else (),
                tuple(self._tokenize_document(memory.key)) if memory.key else (),
            ),
            tuple(grams(memory.content or "") + grams(memory.key or "")),
        )
        self._memories.append(memory)
        self._docs.append(doc)
        self._slots[memory.memory_id] = slot
        self._words.add(slot, doc.words[0] + doc.words[1])
        if doc.grams:
            self._gram_postings.add(slot, doc.grams)
        length = len(doc.words[0]) + len(doc.words[1]) + len(doc.grams) + 1  # + the owner tag
        self._total_length += length
        return length

    def discard(self, memory_id: int) -> None:
        """Remove a memory (nothing when the set does not hold it)."""
        slot = self._slots.pop(memory_id, None)
        if slot is None:
            return
        doc = self._docs[slot]
        assert doc is not None
        self._words.remove(slot, doc.words[0] + doc.words[1])
        self._gram_postings.remove(slot, doc.grams)
        self._total_length -= int(self._length[slot])
        self._alive[slot] = False
        self._memories[slot] = None
        self._docs[slot] = None
        if len(self._memories) > 1024 and len(self._slots) < len(self._memories) // 2:
            self._compact()

    def _grow(self) -> None:
        size = len(self._alive) * 2
        for name, fill in (
            ("_alive", False),
            ("_length", 0.0),
            ("_created", 0),
            ("_expires", _NO_EXPIRY),
            ("_keep", False),
            ("_session", _NO_SESSION),
            ("_happened", 0),
            ("_memory_id", -1),
            ("_type", 0),
        ):
            old = getattr(self, name)
            new = np.full(size, fill, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def _compact(self) -> None:
        """Re-slot the live memories densely (deletes leave holes)."""
        live = [m for m in self._memories if m is not None]
        fresh = OwnerSet.build(self.owner, live, self._tokenize_document, self._tokenize_query)
        fresh.version = self.version
        self.__dict__.update(fresh.__dict__)

    # -- search ------------------------------------------------------------------------------

    def search_keyword(self, scope: SearchScope, text: str, limit: int) -> list[KeywordHit]:
        """The scope's best `limit` keyword matches of `text`, best first."""
        if limit <= 0 or not self._slots:
            return []
        t = terms(text)
        size = len(self._memories)
        norm = self._norm(size)
        scores = self._word_scores(t.words, norm, size)
        gram_scores = self._phrase_scores(self._query_grams(t.cjk_runs), norm, size)
        if gram_scores is not None:
            scores = gram_scores if scores is None else np.maximum(scores, gram_scores)
        if scores is None:
            return []
        found = np.flatnonzero((scores > 0) & self._visible(scope, size))
        if len(found) > limit:
            found = found[np.argpartition(-scores[found], limit - 1)[:limit]]
        best = found[np.argsort(-scores[found], kind="stable")]
        return [KeywordHit(self._memories[slot], float(scores[slot])) for slot in best]

    def _norm(self, size: int) -> np.ndarray:
        average = max(self._total_length / max(len(self._slots), 1), 1e-9)
        return BM25_K1 * (1 - BM25_B) + (BM25_K1 * BM25_B / average) * self._length[:size]

    def _visible(self, scope: SearchScope, size: int) -> np.ndarray:
        """Owner rows the scope may see: alive, not expired, in its session when it asks for
        one, inside retention or kept."""
        mask = self._visible_but_for_age(scope, size)
        if scope.created_after is not None:
            mask &= (self._created[:size] >= micros(scope.created_after, 0)) | self._keep[:size]
        return mask

    def _visible_but_for_age(self, scope: SearchScope, size: int) -> np.ndarray:
        """Alive, not expired, in the scope's session when it asks for one."""
        mask = self._alive[:size] & (self._expires[:size] > micros(scope.now, 0))
        if scope.session_only:
            code = self._session_codes.get(scope.session_id)
            if code is None:
                return np.zeros(size, dtype=bool)
            mask &= self._session[:size] == code
        return mask

    # -- the scope's other reads -------------------------------------------------------------

    def recent(self, scope: SearchScope, limit: int) -> list[Memory]:
        """The scope's newest `limit` memories (created_at, then memory_id, descending)."""
        size = len(self._memories)
        found = np.flatnonzero(self._visible(scope, size))
        order = np.lexsort((-self._memory_id[found], -self._created[found]))[: max(limit, 0)]
        return [self._memories[slot] for slot in found[order]]

    def in_scope(self, scope: SearchScope, memory_ids: Sequence[int]) -> list[Memory]:
        """The memories of these ids the scope may see, in no order (a vector search's hits:
        their rows without a store read)."""
        slots = [slot for slot in map(self._slots.get, memory_ids) if slot is not None]
        if not slots:
            return []
        held = np.fromiter(slots, dtype=np.int64, count=len(slots))
        seen = held[self._visible(scope, len(self._memories))[held]]
        return [self._memories[slot] for slot in seen]

    def count_aged(self, scope: SearchScope, cap: int) -> int:
        """Memories the scope hides for their age alone (older than retention, not kept), up to `cap`."""
        if scope.created_after is None:
            return 0
        size = len(self._memories)
        aged = (
            self._visible_but_for_age(scope, size)
            & ~self._keep[:size]
            & (self._created[:size] < micros(scope.created_after, 0))
        )
        return min(int(np.count_nonzero(aged)), cap)

    def happened_within(self, scope: SearchScope, windows: Sequence[TimeWindow], limit: int) -> list[Memory]:
        """Up to `limit` memories of the scope per window that happened inside it, in time order."""
        size = len(self._memories)
        visible = self._visible(scope, size)
        happened = self._happened[:size]
        found: dict[str, Memory] = {}
        for window in windows:
            inside = np.flatnonzero(
                visible & (happened >= micros(window.start, 0)) & (happened < micros(window.end, 0))
            )
            order = np.lexsort((self._memory_id[inside], happened[inside]))[: max(limit, 0)]
            found.update((m.id, m) for m in (self._memories[slot] for slot in inside[order]) if m is not None)
        return list(found.values())

    def neighbours(self, scope: SearchScope, memories: Sequence[Memory]) -> dict[str, list[Memory]] | None:
        """memory id → the memories of the same type just before and after it in its session
        that the scope may see (a memory without a session has none); None when a memory is
        not this owner's (the store answers)."""
        size = len(self._memories)
        visible = self._visible(scope, size)
        happened, ids = self._happened[:size], self._memory_id[:size]
        out: dict[str, list[Memory]] = {}
        for memory in memories:
            slot = self._slots.get(memory.memory_id)
            if slot is None:
                return None
            if memory.session_id is None:
                continue
            group = np.flatnonzero(
                self._alive[:size]
                & (self._session[:size] == self._session[slot])
                & (self._type[:size] == self._type[slot])
            )
            h, i = happened[slot], ids[slot]
            before = group[(happened[group] < h) | ((happened[group] == h) & (ids[group] < i))]
            after = group[(happened[group] > h) | ((happened[group] == h) & (ids[group] > i))]
            near = []
            if len(before):
                near.append(before[np.lexsort((ids[before], happened[before]))[-1]])
            if len(after):
                near.append(after[np.lexsort((ids[after], happened[after]))[0]])
            out[memory.id] = [self._memories[n] for n in near if visible[n]]
        return out

    def _query_phrases(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        phrases: list[tuple[str, ...]] = []
        for word in words:
            tokens = tuple(self._tokenize_query(word))
            if tokens and tokens not in phrases:
                phrases.append(tokens)
        return self.selective(phrases)

    @staticmethod
    def _query_grams(runs: Sequence[str]) -> list[tuple[str, ...]]:
        grams: list[tuple[str, ...]] = []
        for run in runs:
            if len(run) >= GRAM:
                grams += [(g,) for g in ngrams(run, GRAM) if (g,) not in grams]
        return grams

    def _word_df(self, token: str) -> int:
        """Rows holding `token` in any column, as the store's vocabulary counts it (a CJK run
        of exactly three characters is both a word and a trigram of its row)."""
        words = self._words.rows.get(token, {})
        grams = self._gram_postings.rows.get(token)
        return len(words) if not grams else len(words.keys() | grams.keys())

    def selective(self, phrases: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
        return selective(phrases, lambda: len(self._slots), self._word_df)

    def _word_scores(self, words: Sequence[str], norm: np.ndarray, size: int) -> np.ndarray | None:
        phrases = self._query_phrases(words)
        owned = len(self._slots)
        scores = None
        for phrase in phrases:
            slots, tf = self._phrase_rows(phrase)
            if not len(slots):
                continue
            hits = min(owned, min(self._word_df(token) for token in phrase))
            scores = self._add(scores, size, slots, tf, idf(owned, hits), norm)
        return scores

    def _phrase_scores(self, grams: Sequence[tuple[str, ...]], norm: np.ndarray, size: int) -> np.ndarray | None:
        scores = None
        owned = len(self._slots)
        for (gram,) in grams:
            slots, tf = self._gram_postings.arrays(gram)
            if len(slots):
                scores = self._add(scores, size, slots, tf, idf(owned, len(slots)), norm)
        return scores

    @staticmethod
    def _add(
        scores: np.ndarray | None, size: int, slots: np.ndarray, tf: np.ndarray, weight: float, norm: np.ndarray
    ) -> np.ndarray:
        if scores is None:
            scores = np.zeros(size, dtype=np.float64)
        scores[slots] += weight * tf * (BM25_K1 + 1) / (tf + norm[slots])
        return scores

    def _phrase_rows(self, phrase: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(slots, phrase frequency in content and key) of the rows where `phrase` occurs."""
        if len(phrase) == 1:
            return self._words.arrays(phrase[0])
        common = set(self._words.rows.get(phrase[0], {}))
        for token in phrase[1:]:
            common &= self._words.rows.get(token, {}).keys()
        slots, counts = [], []
        for slot in sorted(common):
            doc = self._docs[slot]
            assert doc is not None
            n = _occurrences(doc.words[0], phrase) + _occurrences(doc.words[1], phrase)
            if n:
                slots.append(slot)
                counts.append(n)
        return np.array(slots, dtype=np.int64), np.array(counts, dtype=np.float64)
