"""Retrieval as of an instant (`asOf`): the same ranking over the memories as they were then.

A fact a key superseded ("I live in Paris" → "I moved to Berlin") keeps its old version
with when it held; Retrieve and Inject with `asOf` answer with the versions valid then and
nothing stored after. The store hands over that past as a searchable view (`PastSource`):
keyword search, the newest memories, dates and neighbouring turns run over it exactly as
they run over the live store, so the ranking, fusion and conversation signals are the same
code.

The vector list needs no second index: the live one holds the current version of every
memory, so a search for k + `newer` (the current memories that began after the instant)
finds the past's best k among those that existed then; the superseded versions valid then
(at most one per key) are embedded for the request and scored alongside. Past k + newer
above the vector search's limit, the vector candidates are the best the limit reaches, and
the resolution says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from memsvc.core.embedding_port import Embeddings
from memsvc.core.retrieval.ranking import (
    RetrievalRequest,
    RetrievalResult,
    Retriever,
    SearchBackend,
    VectorLookup,
    VectorMatch,
    VectorResult,
)
from memsvc.core.retrieval.vector_tier import TIER_QDRANT, in_scope
from memsvc.kernel.embedding_errors import EmbeddingError
from memsvc.kernel.models import Memory, SearchScope
from memsvc.kernel.vector_index import cosine_score

#: The most a vector search returns (vec0's KNN limit; pgvector and Qdrant are clamped alike).
VECTOR_SEARCH_LIMIT = 4096


class PastView(SearchBackend, Protocol):
    """One owner's memories valid at an instant (memsvc.working_set.past.PastView)."""

    memories: list[Memory]
    newer: int


class PastSource(Protocol):
    def as_of(self, owner: str, moment: datetime) -> PastView: ...


@dataclass(frozen=True)
class PastVectors:
    """The VectorLookup of a past: the live lookup's hits that existed then, and the
    superseded versions valid then, on the live tier's score scale."""

    live: VectorLookup
    embeddings: Embeddings
    view: PastView

    def __call__(self, scope: SearchScope, query: str, k: int, settings: Any = None) -> VectorResult:
        wanted = k + self.view.newer
        result = self.live(scope, query, min(wanted, VECTOR_SEARCH_LIMIT), settings)
        current = {m.id for m in self.view.memories if m.valid_to is None}
        matches = [m for m in result.matches if m.memory.id in current]
        superseded = [m for m in self.view.memories if m.valid_to is not None and in_scope(m, scope)]
        notes = []
        if wanted > VECTOR_SEARCH_LIMIT:
            notes.append(
                f"asOf: {self.view.newer} memories began since; vector candidates are the best of the first {VECTOR_SEARCH_LIMIT}"
            )
        if superseded:
            scored, note = self._score(superseded, query, settings, result.tier)
            matches += scored
            notes += [note] if note else []
        matches.sort(key=lambda m: m.score, reverse=True)
        reason = "; ".join([result.resolution.fallback_reason, *notes]).strip("; ")
        return VectorResult(matches[:k], result.tier, replace(result.resolution, fallback_reason=reason))

    def _score(self, versions: Sequence[Memory], query: str, settings: Any, tier: str) -> tuple[list[VectorMatch], str]:
        """The superseded versions by similarity to the query, as the live tier scores (its
        cosine for Qdrant, 1 / (1 + cosine distance) for the store's own index)."""
        try:
            _, vectors = self.embeddings.embed(settings, [m.content for m in versions], wait=False)
            _, query_vector = self.embeddings.embed_one(settings, query, wait=False)
        except EmbeddingError as exc:
            return [], f"asOf: superseded versions ranked by keywords only ({exc})"
        matrix = np.asarray(vectors, dtype=np.float32)
        q = np.asarray(query_vector, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(q)), 1e-12)
        cosines = (matrix @ q) / np.maximum(norms, 1e-12)
        scores = [float(c) if tier == TIER_QDRANT else cosine_score(1.0 - float(c)) for c in cosines]
        return [VectorMatch(m, s) for m, s in zip(versions, scores)], ""


def past_retrieval(
    source: PastSource, retriever: Retriever, embeddings: Embeddings | None, request: RetrievalRequest, moment: datetime
) -> RetrievalResult:
    """`request` answered by `retriever`'s ranking over its owner's memories as they were at
    `moment` (the engine refuses asOf without an owner)."""
    if request.api_key_id is None:
        raise ValueError("asOf needs an owner")
    view = source.as_of(request.api_key_id, moment)
    live = retriever.vectors
    lookup = PastVectors(live, embeddings, view) if live is not None and embeddings is not None else None
    return retriever.over(view, lookup).retrieve(request, now=moment)
