"""What the use cases need from the embedding layer: resolve the source the settings select,
embed through its cache, report status and rerank. `memsvc.embedding.resolver.Embeddings`
is the implementation `memsvc.app` passes in; core never imports the adapter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from memsvc.core.settings.memory import MemorySettings
from memsvc.kernel.embedding import EmbeddingSource, EmbeddingStatus, Resolved


class Embeddings(Protocol):
    """The embedding service as the engine, reindex and introspection call it. Each embed
    raises NoEmbeddingSource (keyword only) or EmbeddingError; `wait=False` raises
    EmbeddingNotReady instead of blocking on a model that is still loading."""

    def resolve(self, settings: MemorySettings) -> Resolved: ...

    def embed(
        self, settings: MemorySettings, texts: Sequence[str], *, wait: bool = True
    ) -> tuple[Resolved, np.ndarray]: ...

    def embed_one(self, settings: MemorySettings, text: str, *, wait: bool = True) -> tuple[Resolved, np.ndarray]: ...

    def embed_with(self, source: EmbeddingSource, texts: Sequence[str]) -> np.ndarray: ...

    def status(self, settings: MemorySettings) -> EmbeddingStatus: ...

    def providers(self) -> list[dict[str, Any]]: ...

    def rerank_status(self, settings: MemorySettings) -> dict[str, Any]: ...

    def rerank(
        self, settings: MemorySettings, query: str, documents: Sequence[str], top_n: int | None = None
    ) -> list[tuple[int, float]]: ...
