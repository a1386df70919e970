"""GetEngineStatus, ListEmbeddingProviders and the Qdrant settings operations: every field
measured (a real FTS5 query, the resolver's state and whether its model is loading, real row
counts, a real Qdrant probe), none assumed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memsvc.core.backend_manager import BackendStatus
from memsvc.core.reindex import ReindexStatus
from memsvc.core.retrieval.vector_tier import VectorTier
from memsvc.core.settings.memory import MemorySettings, Settings
from memsvc.core.settings.qdrant import QdrantSettings, QdrantSettingsManager
from memsvc.kernel.embedding import EmbeddingStatus
from memsvc.kernel.embedding_errors import EmbeddingError
from memsvc.kernel.errors import PreconditionError, UnavailableError, ValidationError, Violations
from memsvc.kernel.models import SearchScope, utcnow
from memsvc.kernel.vector_index import VectorError, as_vector

SEARCH_TOP_K = (1, 20)
DEFAULT_SEARCH_TOP_K = 5


__all__ = ["EmbeddingStatus", "Introspection", "QdrantHit"]


@dataclass(frozen=True)
class QdrantHit:
    id: str
    score: float
    api_key_id: str
    session_id: str
    key: str
    content: str


class Introspection:
    def __init__(
        self,
        keyword_probe: Callable[[], tuple[bool, str]],
        vectors: VectorTier,
        settings: Settings,
        qdrant_settings: QdrantSettingsManager,
        retrieval: Callable[[], dict[str, Any]],
        backends: Callable[[], list[BackendStatus]] | None = None,
        reindex: Callable[[], ReindexStatus] | None = None,
        keyword_backend: str = "FTS5",
        working_sets: Callable[[], dict[str, int]] | None = None,
    ):
        self._keyword_probe = keyword_probe
        self._keyword_backend = keyword_backend  # what answers keyword search: SQLite's FTS5 or PostgreSQL's
        self._vectors = vectors
        self._settings = settings
        self._qdrant_settings = qdrant_settings
        self._retrieval = retrieval  # Retriever.status: the fusion in use
        self._backends = backends or (list)  # BackendManager.check_all: every backend probed now
        self._reindex = reindex or ReindexStatus  # Reindexer.status: the database's job, from any process
        self._working_sets = working_sets  # WorkingSets.status of the store, when it has them

    # ---- engine status ----

    def engine_status(self) -> dict[str, Any]:
        """Each part as measured now; "embedding" is an EmbeddingStatus (say `loading`,
        not `available`, while a model loads)."""
        settings = self._settings.get()
        keyword_ok, keyword_error = self._keyword_probe()
        vector = self._vectors.state(settings)
        return {
            "keyword": {"available": keyword_ok, "backend": self._keyword_backend, "reason": keyword_error},
            "embedding": self._vectors.embeddings.status(settings),
            "vector_store": {
                "backend": vector.backend,
                "available": vector.available,
                "row_count": vector.row_count,
                "needs_reindex": vector.needs_reindex,
                "reason": vector.reason,
                "signature": vector.signature,
            },
            "qdrant": self._qdrant_status(),
            "rerank": self._vectors.embeddings.rerank_status(settings),
            "retrieval": self._retrieval(),
            "backends": self._backends(),
            "reindex": self._reindex(),
            "working_sets": self._working_sets() if self._working_sets is not None else None,
        }

    def _qdrant_status(self) -> dict[str, Any]:
        if not self._qdrant_settings.get().enabled:
            return {"enabled": False, "healthy": False, "latency_ms": 0, "error": ""}
        health = self.qdrant_health()
        return {
            "enabled": True,
            "healthy": health["ok"],
            "latency_ms": health["latency_ms"] or 0,
            "error": health["error"] or "",
        }

    def providers(self) -> list[dict[str, Any]]:
        return self._vectors.embeddings.providers()

    # ---- qdrant ----

    def qdrant_settings(self) -> QdrantSettings:
        return self._qdrant_settings.get()

    def update_qdrant_settings(self, patch: Mapping[str, Any]) -> QdrantSettings:
        """Saves the Qdrant settings, then points the engine at (or away from) Qdrant."""
        update = self._qdrant_settings.update(patch)
        if update.memory_patch:
            self._settings.update(update.memory_patch)
        return update.settings

    def qdrant_health(self) -> dict[str, Any]:
        try:
            index = self._vectors.qdrant.index()
        except VectorError as exc:
            return {"ok": False, "latency_ms": 0, "error": str(exc), "collection_exists": False, "points_count": 0}
        if index is None:
            return {
                "ok": False,
                "latency_ms": 0,
                "error": "Qdrant is not enabled",
                "collection_exists": False,
                "points_count": 0,
            }
        health: dict[str, Any] = index.health()
        return health

    def _qdrant_index(self) -> Any:
        try:
            index = self._vectors.qdrant.index()
        except VectorError as exc:
            raise UnavailableError(str(exc)) from None
        if index is None:
            raise PreconditionError("Qdrant is not enabled", reason="QDRANT_DISABLED")
        return index

    def search_qdrant(
        self, query: str, api_key_id: str = "", session_id: str = "", top_k: int | None = None
    ) -> list[QdrantHit]:
        v = Violations()
        if not query.strip():
            v.add("query", "is required")
        if top_k is not None and not SEARCH_TOP_K[0] <= top_k <= SEARCH_TOP_K[1]:
            v.add("topK", f"must be between {SEARCH_TOP_K[0]} and {SEARCH_TOP_K[1]}")
        v.raise_if_any()
        index = self._qdrant_index()
        settings: MemorySettings = self._settings.get()
        try:
            _, embedded = self._vectors.embeddings.embed_one(settings, query)
        except EmbeddingError as exc:
            raise PreconditionError(f"no usable embedding source: {exc}", reason="NO_EMBEDDING_SOURCE") from None
        try:
            vector = as_vector(embedded)
        except VectorError:  # all zeros: the model knows none of the query's words, so nothing is near it
            return []
        try:
            scope = SearchScope(
                api_key_id=api_key_id or None,
                now=utcnow(),
                session_only=bool(session_id),
                session_id=session_id or None,
            )
            points = index.search_points(scope, vector, top_k or DEFAULT_SEARCH_TOP_K)
        except VectorError as exc:
            raise UnavailableError(f"qdrant search failed: {exc}") from None
        return [
            QdrantHit(
                p.id,
                p.score,
                str(p.payload.get("apiKeyId") or ""),
                str(p.payload.get("sessionId") or ""),
                str(p.payload.get("key") or ""),
                str(p.payload.get("content") or ""),
            )
            for p in points
        ]

    def cleanup_qdrant(self, retention_days: int | None = None) -> int:
        if retention_days is not None and not 1 <= retention_days <= 365:
            raise ValidationError.single("retentionDays", "must be between 1 and 365")
        index = self._qdrant_index()
        try:
            return int(index.cleanup(retention_days or self._settings.get().retention_days))
        except VectorError as exc:
            raise UnavailableError(f"qdrant cleanup failed: {exc}") from None

    def qdrant_models(self) -> list[dict[str, Any]]:
        """Models a Qdrant collection can be filled with: every embedding model known here."""
        return [
            {**model, "provider": provider["provider"]}
            for provider in self._vectors.embeddings.providers()
            for model in provider["models"]
        ]
