"""Duplicates merged on write: before a memory without a key is stored, the owner's memories
most like it are asked whether one already says the same (memsvc.core.dedup decides); if one
does, the draft touches it instead (`NewMemory.merge_into`: its history records the merge, and
the response names it) and no row is added.

Which drafts: a key decides by itself (a keyed create updates the owner's memory of that key),
and a conversation turn (episodic, in a session) is an event, never a repeat of another, so
only keyless memories that are not turns are compared, and only with memories of their owner
that already hold everything else the draft carries (`absorbs`: type, session, metadata, a
life at least as long, when it happened). Off with the memory setting dedupOnWrite, and whenever the built-in store is not
the primary backend (the candidates come from its indexes).

Candidates: the draft's nearest memories in the owner's vectors (the draft was embedded for
its own vector anyway, so the cosine costs no embedding), or, for a store without embeddings
(or vectors that answer nothing), its best keyword matches, decided by the text alone. A
draft that repeats none of them is compared, the same way, with the earlier drafts of its own
write (a batch, or the concurrent creates one group commit stores together) that are stored as
new memories: one fact said twice in one write is stored once (`NewMemory.repeats`). Writes of
one fact in two processes at the same instant are not compared with each other: both are
stored (the next write of it merges).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Protocol, TypeVar

import numpy as np

from memsvc.core.dedup import is_duplicate, profile
from memsvc.core.settings.memory import Settings
from memsvc.kernel.models import KeywordHit, Memory, NewMemory, SearchScope, utcnow
from memsvc.kernel.vector_index import best_first, normalized

log = logging.getLogger("memsvc.core.duplicates")
#: Candidates asked per draft from each list.
CANDIDATES = 5
#: A conversation turn: episodic, in a session (memsvc.core.retrieval.conversation_signals).
TURN_TYPE = "episodic"
_ABSENT = object()
T = TypeVar("T")


class Nearest(Protocol):
    def nearest(self, scope: SearchScope, vectors: np.ndarray, k: int) -> list[list[tuple[Memory, float]]]:
        """For each of `vectors`, the scope's memories nearest it, with their cosine similarity."""
        ...


class KeywordSearch(Protocol):
    def search_keyword(self, scope: SearchScope, text: str, limit: int) -> list[KeywordHit]: ...


def _turn(memory: NewMemory | Memory) -> bool:
    return memory.type == TURN_TYPE and bool(memory.session_id)


def eligible(draft: NewMemory) -> bool:
    """A draft that may merge: no key, not a conversation turn, not merging already."""
    return draft.key is None and not _turn(draft) and draft.merge_into is None


def absorbs(memory: Memory | NewMemory, draft: NewMemory) -> bool:
    """Whether `memory` already holds everything the draft carries besides its words: a merge
    drops the draft, so nothing of it may be lost. Its session (a session-scoped retrieval
    would no longer find it elsewhere), its metadata (a speaker, a source: the same sentence
    said by another person is another memory), a longer life (a memory that expires sooner,
    or is not kept while the draft is, would take the draft with it) and when it happened (the
    same note on another day is another event)."""
    if memory.type != draft.type or memory.session_id != draft.session_id or _turn(memory):
        return False
    if any(memory.metadata.get(name, _ABSENT) != value for name, value in draft.metadata.items()):
        return False
    if memory.expires_at is not None and (draft.expires_at is None or draft.expires_at > memory.expires_at):
        return False
    if draft.keep and not memory.keep:
        return False
    return draft.occurred_at is None or draft.occurred_at == memory.occurred_at


def repeats(draft: NewMemory, existing: Memory | NewMemory, cosine: float | None) -> bool:
    """Whether the draft says what `existing` says and `existing` holds all the draft carries."""
    return absorbs(existing, draft) and is_duplicate(draft.content, existing.content, cosine)


def _safely(check: Callable[[], T]) -> T | None:
    """The check's answer, or None when it fails: looking for a duplicate must never fail
    the write it precedes (at worst the draft is stored as a memory of its own)."""
    try:
        return check()
    except Exception as exc:  # noqa: BLE001 - an optional check; the write goes on without it
        log.warning("memory.dedup.skipped", extra={"error_type": type(exc).__name__})
        return None


class Duplicates:
    """Marks the drafts that repeat an existing memory (`mark`)."""

    def __init__(
        self, settings: Settings, nearest: Nearest, keywords: KeywordSearch, applies: Callable[[], bool]
    ) -> None:
        self._settings = settings
        self._nearest = nearest
        self._keywords = keywords
        self._applies = applies

    def mark(self, drafts: Sequence[NewMemory], vectors: Any = None) -> list[NewMemory]:
        """`drafts` with `merge_into` set on each that repeats an existing memory, `repeats` on
        each that repeats an earlier draft of `drafts` (`vectors`: the drafts' embeddings in
        order, or None when they have none)."""
        if not any(eligible(d) for d in drafts) or not self._settings.get().dedup_on_write or not self._applies():
            return list(drafts)
        now = utcnow()
        nearest = _safely(partial(self._nearest_of, drafts, vectors, now)) or {}
        out: list[NewMemory] = []
        within = _Within(drafts, vectors)
        for i, draft in enumerate(drafts):
            if not eligible(draft):
                out.append(draft)
                continue
            found = _safely(partial(self._repeated, draft, nearest.get(i, []), now))
            if found is not None:
                out.append(replace(draft, merge_into=found.id))
                continue
            earlier = _safely(partial(within.repeated, i))
            if earlier is None:
                within.stored_new(i)
            out.append(draft if earlier is None else replace(draft, repeats=earlier))
        return out

    def _nearest_of(self, drafts: Sequence[NewMemory], vectors: Any, now: Any) -> dict[int, list[tuple[Memory, float]]]:
        """The nearest memories of each eligible draft with a vector, by its index: one search
        per owner for all of that owner's drafts."""
        if vectors is None:
            return {}
        by_owner: dict[str, list[int]] = {}
        for i, draft in enumerate(drafts):
            if eligible(draft):
                by_owner.setdefault(draft.api_key_id, []).append(i)
        out: dict[int, list[tuple[Memory, float]]] = {}
        for owner, indexes in by_owner.items():
            scope = SearchScope(api_key_id=owner, now=now)
            found = self._nearest.nearest(scope, np.asarray(vectors)[indexes], CANDIDATES)
            out.update(zip(indexes, found))
        return out

    def _repeated(self, draft: NewMemory, nearest: list[tuple[Memory, float]], now: Any) -> Memory | None:
        """The first candidate that says what the draft says and holds all it carries: the
        draft's nearest memories by vector, with their cosine, or by keywords (no cosine: the
        text alone decides) when it has no vector or the vectors answer nothing. A merge needs
        a cosine of at least the rule's floor, so a repeat is among the nearest; the keyword
        list would add only candidates the vectors already ranked below them, and cost a
        search and their comparisons on every write (bench/writes_bench.py)."""
        candidates: list[tuple[Memory, float | None]] = list(nearest)
        if not candidates:
            scope = SearchScope(api_key_id=draft.api_key_id, now=now)
            candidates = [(hit.memory, None) for hit in self._keywords.search_keyword(scope, draft.content, CANDIDATES)]
        return next((memory for memory, cosine in candidates if repeats(draft, memory, cosine)), None)


class _Within:
    """The drafts of one write (a batch, or the concurrent creates of one group commit) as
    candidates for the later ones: a fact said twice in one write is stored once. Only
    drafts stored as new memories are candidates (one merged into an existing memory was
    judged against that memory, not against the later draft), and only of the same owner.
    Ranked like the store's candidates: by the cosine of the drafts' vectors, or, without
    vectors, by the content words they share."""

    def __init__(self, drafts: Sequence[NewMemory], vectors: Any) -> None:
        self._drafts = drafts
        self._vectors = vectors
        self._cosines: np.ndarray | None = None  # drafts x drafts, made on the first need
        self._new: dict[str, list[int]] = {}  # owner -> indexes of drafts stored as new

    def stored_new(self, i: int) -> None:
        self._new.setdefault(self._drafts[i].api_key_id, []).append(i)

    def repeated(self, i: int) -> int | None:
        """The index of the best-ranked earlier new draft that draft `i` repeats, or None."""
        draft = self._drafts[i]
        ranked = self._ranked(i, self._new.get(draft.api_key_id, []))
        return next((j for j, cosine in ranked if repeats(draft, self._drafts[j], cosine)), None)

    def _ranked(self, i: int, candidates: list[int]) -> list[tuple[int, float | None]]:
        """The best `CANDIDATES` of `candidates` for draft `i`, best first."""
        if not candidates:
            return []
        if self._vectors is not None:
            if self._cosines is None:
                unit = normalized(self._vectors)
                self._cosines = unit @ unit.T
            cosines = self._cosines[i, candidates]
            best = best_first(cosines, np.asarray(candidates), CANDIDATES)
            return [(candidates[n], float(cosines[n])) for n in best]
        words = profile(self._drafts[i].content).content
        shared = {j: len(words & profile(self._drafts[j].content).content) for j in candidates}
        ranked = sorted((j for j in candidates if shared[j] or not words), key=lambda j: -shared[j])
        return [(j, None) for j in ranked[:CANDIDATES]]
