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
(or vectors that answer nothing), its best keyword matches, decided by the text alone. Concurrent
writes of one fact in one group commit, or in two processes at once, are not compared with
each other: both are stored (the next write of it merges).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from memsvc.core.dedup import is_duplicate
from memsvc.core.settings.memory import Settings
from memsvc.kernel.models import KeywordHit, Memory, NewMemory, SearchScope, utcnow

log = logging.getLogger("memsvc.core.duplicates")
#: Candidates asked per draft from each list.
CANDIDATES = 5
#: A conversation turn: episodic, in a session (memsvc.core.retrieval.conversation_signals).
TURN_TYPE = "episodic"
_ABSENT = object()


class Nearest(Protocol):
    def nearest(self, scope: SearchScope, vector: np.ndarray, k: int) -> list[tuple[Memory, float]]:
        """The scope's memories nearest `vector`, with their cosine similarity."""
        ...


class KeywordSearch(Protocol):
    def search_keyword(self, scope: SearchScope, text: str, limit: int) -> list[KeywordHit]: ...


def _turn(memory: NewMemory | Memory) -> bool:
    return memory.type == TURN_TYPE and bool(memory.session_id)


def eligible(draft: NewMemory) -> bool:
    """A draft that may merge: no key, not a conversation turn, not merging already."""
    return draft.key is None and not _turn(draft) and draft.merge_into is None


def absorbs(memory: Memory, draft: NewMemory) -> bool:
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
        """`drafts` with `merge_into` set on each that repeats an existing memory (`vectors`:
        the drafts' embeddings in order, or None when they have none)."""
        if not any(eligible(d) for d in drafts) or not self._settings.get().dedup_on_write or not self._applies():
            return list(drafts)
        now = utcnow()
        out = []
        for i, draft in enumerate(drafts):
            vector = None if vectors is None else vectors[i]
            found = self._checked(draft, vector, now) if eligible(draft) else None
            out.append(replace(draft, merge_into=found.id) if found is not None else draft)
        return out

    def _checked(self, draft: NewMemory, vector: np.ndarray | None, now: Any) -> Memory | None:
        """`_repeated`, or None when the check itself fails: looking for a duplicate must never
        fail the write it precedes (at worst the draft is stored as a memory of its own)."""
        try:
            return self._repeated(draft, vector, now)
        except Exception as exc:  # noqa: BLE001 - an optional check; the write goes on without it
            log.warning("memory.dedup.skipped", extra={"error_type": type(exc).__name__})
            return None

    def _repeated(self, draft: NewMemory, vector: np.ndarray | None, now: Any) -> Memory | None:
        """The first candidate that says what the draft says and holds all it carries."""
        for memory, cosine in self._candidates(draft, vector, SearchScope(api_key_id=draft.api_key_id, now=now)):
            if absorbs(memory, draft) and is_duplicate(draft.content, memory.content, cosine):
                return memory
        return None

    def _candidates(
        self, draft: NewMemory, vector: np.ndarray | None, scope: SearchScope
    ) -> list[tuple[Memory, float | None]]:
        """The draft's nearest memories by vector, with their cosine; by keywords (no cosine:
        the text alone decides) when it has no vector or the vectors answer nothing. A merge
        needs a cosine of at least the rule's floor, so a repeat is among the nearest; the
        keyword list would add only candidates the vectors already ranked below them, and
        cost a search and their comparisons on every write (bench/writes_bench.py)."""
        nearest = self._nearest.nearest(scope, vector, CANDIDATES) if vector is not None else []
        if nearest:
            return [(memory, cosine) for memory, cosine in nearest]
        return [(hit.memory, None) for hit in self._keywords.search_keyword(scope, draft.content, CANDIDATES)]
