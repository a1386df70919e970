"""The vector tiers seen from the engine: keeping vectors in step with memories, and
answering vector lookups with their fallbacks (each tier that fails falls through to the
next and says why).

The store's own index (sqlite-vec or pgvector) is tier 1 and always present when the store
has it; Qdrant is tier 2, used for search only when the memory settings say
`vectorStore: qdrant` and it answers; a Qdrant failure (down, dimension mismatch) falls back
to tier 1 with the reason, and a failing vector tier falls back to keyword search (the
retriever's job, on VectorUnavailable).

Request paths never wait for a model to load (`wait=False`): a model still loading makes a
write mark its rows `needs_reindex` and a search fall back to keywords, saying why.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
from opentelemetry.trace import Span

from memsvc.core.background import BackgroundWriter
from memsvc.core.embedding_port import Embeddings
from memsvc.core.retrieval.ranking import Resolution, VectorMatch, VectorResult, VectorUnavailable
from memsvc.core.settings.memory import MemorySettings, Settings
from memsvc.core.settings.qdrant import QdrantSettings, QdrantSettingsManager
from memsvc.kernel import tracing
from memsvc.kernel.embedding import Resolved, apply_rerank
from memsvc.kernel.embedding_errors import EmbeddingError, NoEmbeddingSource
from memsvc.kernel.inline import may_block
from memsvc.kernel.models import Memory, NewMemory, SearchScope
from memsvc.kernel.vector_index import VectorError, VectorHit, VectorRow

log = logging.getLogger("memsvc.core.vectors")

# Rows of the searching owner embedded before a search when they still lack a vector.
BACKFILL_PER_REQUEST = 64
TIER_LOCAL = "vector"
TIER_QDRANT = "qdrant"
QDRANT_WRITE_FAILED = "memory.qdrant.write.failed"


class MemoryLoader(Protocol):
    def get_many(self, ids: Sequence[str]) -> dict[str, Memory]: ...


@dataclass(frozen=True)
class VectorState:
    """What GetEngineStatus reports about the vector store."""

    backend: str
    available: bool
    row_count: int
    needs_reindex: int
    reason: str
    signature: str | None


class QdrantConnector:
    """The Qdrant index for the current Qdrant settings, rebuilt when they change."""

    def __init__(self, manager: QdrantSettingsManager, data_dir: str, factory: Callable[[QdrantSettings, str], Any]):
        self._manager = manager
        self._data_dir = data_dir
        self._factory = factory
        self._lock = threading.Lock()
        self._current: tuple[QdrantSettings, Any] | None = None

    def settings(self) -> QdrantSettings:
        return self._manager.get()

    def index(self) -> Any | None:
        """The index when Qdrant is enabled, else None. Raises VectorError if it cannot be built."""
        settings = self._manager.get()
        if not settings.enabled:
            self.close()
            return None
        with self._lock:
            if self._current is None or self._current[0] != settings:
                old = self._current
                try:
                    self._current = (settings, self._factory(settings, self._data_dir))
                except VectorError:
                    raise
                except Exception as exc:  # qdrant-client raises its own types on connect
                    raise VectorError(f"qdrant unavailable: {type(exc).__name__}") from exc
                if old is not None:
                    old[1].close()
            return self._current[1]

    def close(self) -> None:
        with self._lock:
            if self._current is not None:
                self._current[1].close()
                self._current = None


class VectorTier:
    def __init__(
        self,
        embeddings: Embeddings,
        local_index: Any,
        qdrant: QdrantConnector,
        settings: Settings,
        memories: MemoryLoader,
        background: BackgroundWriter,
        top_k: int = 20,
    ):
        self.embeddings = embeddings
        self.local = local_index
        self.qdrant = qdrant
        self._settings = settings
        self._memories = memories
        self._background = background
        self._top_k = top_k

    # ---- resolution ----

    def _ready(self, settings: MemorySettings, text: str) -> tuple[Resolved, np.ndarray]:
        """Embed one text for a request path; VectorUnavailable with the reason otherwise."""
        try:
            resolved, vector = self.embeddings.embed_one(settings, text, wait=False)
        except EmbeddingError as exc:
            raise VectorUnavailable(str(exc)) from None
        return resolved, vector

    def _ensure_local(self, resolved: Resolved) -> None:
        if not self.local.available:
            raise VectorUnavailable(f"the {self.local.name} extension is not loaded")
        self.local.ensure(resolved.signature, resolved.dimensions)

    # ---- writes ----

    def creating(self, drafts: Sequence[NewMemory]) -> VectorWrite:
        """The vectors of drafts about to be stored, embedded now (one `embed` call for the
        batch, before the write transaction, so a model never holds the writer lock); the
        returned follow-up stores them in the transaction that stores the drafts."""
        return VectorWrite(self, [d.content for d in drafts])

    def written(self, ids: Sequence[str]) -> None:
        """Embed and index memories whose text just changed (after their own commit). Never
        raises: a row that could not be embedded is marked needs_reindex and picked up by
        backfill or Reindex."""
        if not ids:
            return
        memories = list(self._memories.get_many(ids).values())
        if memories:
            VectorWrite(self, [m.content for m in memories]).apply(memories)

    def _mark(self, memories: list[Memory]) -> None:
        try:
            self.local.mark_failed(memories)
        except VectorError:
            log.warning("memory.vector.mark_failed", extra={"count": len(memories)})

    def _dual_write(self, resolved: Resolved, rows: list[VectorRow]) -> None:
        """Writes after Qdrant was enabled also go there, in the background."""
        if not self.qdrant.settings().enabled:
            return

        def write() -> None:
            index = self.qdrant.index()
            if index is not None:
                index.ensure(resolved.signature, resolved.dimensions)
                index.upsert(rows)

        self._background.submit(QDRANT_WRITE_FAILED, write)

    def removed(self, ids: Sequence[str]) -> None:
        """Best-effort removal of Qdrant points, in the background (the local index's rows are
        deleted in the same transaction as their memories, by a storage delete hook)."""
        if not ids or not self.qdrant.settings().enabled:
            return
        ids = list(ids)

        def remove() -> None:
            index = self.qdrant.index()
            if index is not None:
                result = index.delete(ids)
                if not result.ok:
                    raise VectorError(result.error or "qdrant delete failed")

        self._background.submit("memory.qdrant.delete.failed", remove)

    def rescoped(self, memories: Sequence[Memory]) -> None:
        """Session, expiry or keep changed without new text: update the filter columns only
        (and, after Qdrant was enabled, the points' `keep`, in the background)."""
        if memories and self.local.available:
            try:
                self.local.update_scope(list(memories))
            except VectorError:
                self._mark(list(memories))
        if memories and self.qdrant.settings().enabled:
            scoped = list(memories)

            def write() -> None:
                index = self.qdrant.index()
                if index is not None:
                    index.set_keep(scoped)

            self._background.submit(QDRANT_WRITE_FAILED, write)

    # ---- search ----

    def __call__(self, scope: SearchScope, query: str, k: int, settings: MemorySettings | None = None) -> VectorResult:
        """The retriever's VectorLookup."""
        settings = settings or self._settings.get()
        resolved, vector = self._ready(settings, query)
        base = Resolution(strategy_used="", embedding_source=resolved.name, embedding_model=resolved.model or "")
        fallback = ""
        if settings.vector_store == "qdrant":
            try:
                with _searching(TIER_QDRANT, "qdrant", k) as span:
                    result = self._search_qdrant(scope, resolved, vector, k, base)
                    span.set_attribute(tracing.HITS, len(result.matches))
                    return result
            except VectorError as exc:
                fallback = f"qdrant failed ({exc}); used {self.local.name}"
        with _searching(TIER_LOCAL, self.local.name, k) as span:
            result = self._search_local(scope, resolved, vector, k, base, fallback)
            span.set_attribute(tracing.HITS, len(result.matches))
        return result

    def _search_qdrant(
        self, scope: SearchScope, resolved: Resolved, vector: np.ndarray, k: int, base: Resolution
    ) -> VectorResult:
        may_block("a Qdrant search")
        index = self.qdrant.index()
        if index is None:
            raise VectorError("vectorStore is qdrant but Qdrant is not enabled")
        hits = index.search(scope, vector, k)
        return VectorResult(self._matches(hits, scope), TIER_QDRANT, replace(base, vector_store="qdrant"))

    def _search_local(
        self, scope: SearchScope, resolved: Resolved, vector: np.ndarray, k: int, base: Resolution, fallback: str
    ) -> VectorResult:
        try:
            self._ensure_local(resolved)
            self._backfill(scope, resolved)
            hits = self.local.search(scope, vector, k)
        except VectorError as exc:
            reason = f"{fallback}; {exc}" if fallback else str(exc)
            raise VectorUnavailable(reason) from None
        return VectorResult(
            self._matches(hits, scope),
            TIER_LOCAL,
            replace(base, vector_store=self.local.name, fallback_reason=fallback),
        )

    def _backfill(self, scope: SearchScope, resolved: Resolved) -> None:
        """Before a search, embed (a bounded number of) the owner's rows still missing a
        vector, so a changed source or a deferred write is searchable without a Reindex."""
        pending = self.local.pending_for_search(scope, BACKFILL_PER_REQUEST)
        if not pending or resolved.source is None:
            return
        may_block("storing vectors")
        try:
            vectors = self.embeddings.embed_with(resolved.source, [m.content for m in pending])
        except EmbeddingError:
            return  # the search still runs over the vectors that exist
        self.local.upsert([VectorRow.from_memory(m, v) for m, v in zip(pending, vectors)])
        self.local.see_own_writes()  # the search below runs in the request's snapshot: move it past them

    def nearest(self, scope: SearchScope, vectors: np.ndarray, k: int) -> list[list[tuple[Memory, float]]]:
        """For each of several vectors already made (drafts', on their way to the store), the
        scope's memories nearest it, each with its cosine similarity, from the store's own
        index in one search; none when it cannot answer (no vectors yet, another dimension):
        the caller then has no candidate."""
        try:
            found = self.local.search_many(scope, list(vectors), k) if self.local.available else []
        except VectorError:
            found = []
        if not found:
            return [[] for _ in vectors]
        out = []
        for hits in found:
            matched = {m.memory.id: m.memory for m in self._matches(hits, scope)}
            out.append([(matched[h.id], 1.0 - h.distance) for h in hits if h.id in matched])
        return out

    def _matches(self, hits: Sequence[VectorHit], scope: SearchScope) -> list[VectorMatch]:
        """Hits as memories (those the index did not read already are loaded), re-checked
        against the scope (a stale vector or point never surfaces a memory out of scope, it
        only costs a slot)."""
        missing = [h.id for h in hits if h.memory is None]
        loaded = self._memories.get_many(missing) if missing else {}
        out = []
        for hit in hits:
            memory = hit.memory or loaded.get(hit.id)
            if memory is not None and in_scope(memory, scope):
                out.append(VectorMatch(memory, hit.score))
        return out

    # ---- introspection ----

    def state(self, settings: MemorySettings) -> VectorState:
        qdrant_selected = settings.vector_store == "qdrant"
        backend = "qdrant" if qdrant_selected else self.local.name  # "sqlite-vec" or "pgvector"
        if not self.local.available:
            return VectorState(
                backend,
                False,
                0,
                self._safe(self.local.pending_count),
                f"the {self.local.name} extension is not loaded",
                None,
            )
        resolved = self.embeddings.resolve(settings)
        reason = "" if resolved.source is not None else f"no embedding source: {resolved.reason}"
        return VectorState(
            backend,
            resolved.source is not None,
            self._safe(self.local.count),
            self._safe(self.local.pending_count),
            reason,
            self.local.state().signature,
        )

    @staticmethod
    def _safe(probe: Callable[[], int]) -> int:
        try:
            return int(probe())
        except VectorError:
            return 0


class VectorWrite:
    """Vectors for texts being written, made before the write: embedded with
    `wait=False`, so a model still loading defers them (the rows are marked needs_reindex)
    instead of blocking. Then stored either inside the transaction that writes the memories
    (`in_transaction`, the memory create path) or in a transaction of their own after it
    (`apply`). Never raises for a vector problem: those rows are marked, never lost."""

    def __init__(self, tier: VectorTier, texts: list[str]):
        self._tier = tier
        #: The texts' vectors in order (None: not embedded, for whatever reason).
        self.vectors: np.ndarray | None = None
        self._resolved: Resolved | None = None
        self._deferred = ""
        self._rows: list[VectorRow] = []
        if not texts:
            return
        try:
            self._resolved, self.vectors = tier.embeddings.embed(tier._settings.get(), texts, wait=False)
            tier._ensure_local(self._resolved)
        except NoEmbeddingSource:
            self.vectors = None  # keyword only: nothing to index, nothing owed
        except (EmbeddingError, VectorError, VectorUnavailable) as exc:
            self.vectors = None
            self._deferred = str(exc) or type(exc).__name__

    def in_transaction(self, txn: Any, stored: Sequence[Memory | None]) -> None:
        """`stored[i]` is the row written for texts[i] (None: that draft failed)."""
        local = self._tier.local
        self._store(
            stored,
            lambda rows: local.upsert_in_transaction(txn, rows),
            lambda memories: local.mark_failed_in_transaction(txn, memories),
        )

    def committed(self, stored: Sequence[Memory]) -> None:
        if self._rows and self._resolved is not None:
            self._tier._dual_write(self._resolved, self._rows)

    def apply(self, memories: Sequence[Memory]) -> None:
        """Store the vectors of memories already committed, in a transaction of their own."""
        self._store(memories, self._tier.local.upsert, self._tier._mark)
        self.committed(memories)

    def _store(
        self,
        stored: Sequence[Memory | None],
        upsert: Callable[[list[VectorRow]], Any],
        mark: Callable[[list[Memory]], Any],
    ) -> None:
        written = [m for m in stored if m is not None]
        if not written or (self.vectors is None and not self._deferred):
            return
        rows: list[VectorRow] = []
        unusable: list[Memory] = []
        if self.vectors is not None:
            for memory, vector in zip(stored, self.vectors):
                if memory is None:
                    continue
                try:
                    rows.append(VectorRow.from_memory(memory, vector))
                except VectorError as exc:  # e.g. a zero vector: only this row waits
                    self._deferred = str(exc)
                    unusable.append(memory)
            # Two drafts of one memory (same owner and key) in a batch: the later one is
            # what the row now holds.
            rows = list({row.memory_id: row for row in rows}.values())
            try:
                upsert(rows)
                self._rows = rows
            except VectorError as exc:
                self._deferred = str(exc)
                unusable = written
        else:
            unusable = written
        if unusable:
            log.info("memory.vector.deferred", extra={"count": len(unusable), "reason": self._deferred[:200]})
            mark(unusable)


class SettingsReranker:
    """The retriever's reranker: the configured rerank endpoint when rerankEnabled."""

    def __init__(self, embeddings: Embeddings, settings: Settings):
        self._embeddings = embeddings
        self._settings = settings

    def __call__(self, query: str, items: list[Any], settings: MemorySettings | None = None) -> list[Any] | None:
        settings = settings or self._settings.get()
        if not settings.rerank_enabled:
            return None
        attributes = {tracing.REQUEST_MODEL: settings.rerank_provider_model, tracing.RERANK_DOCUMENTS: len(items)}
        with tracing.span("rerank", {k: v for k, v in attributes.items() if v is not None}):
            ranking = self._embeddings.rerank(settings, query, [i.memory.content for i in items], top_n=len(items))
        return [
            replace(item, score=score) if score is not None else item for item, score in apply_rerank(items, ranking)
        ]


def _searching(tier: str, store: str, k: int) -> AbstractContextManager[Span]:
    """The span of one vector search (the store's own index, or Qdrant)."""
    return tracing.span("vector_search", {tracing.TIER: tier, tracing.VECTOR_STORE: store, tracing.LIMIT: k})


def in_scope(memory: Memory, scope: SearchScope) -> bool:
    if scope.api_key_id is not None and memory.api_key_id != scope.api_key_id:
        return False
    if scope.session_only and memory.session_id != scope.session_id:
        return False
    if memory.expires_at is not None and memory.expires_at <= scope.now:
        return False
    return scope.created_after is None or memory.keep or memory.created_at >= scope.created_after
