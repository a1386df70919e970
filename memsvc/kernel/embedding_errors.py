"""The embedding layer's exceptions.

Their messages travel to clients (engine status, a retrieval's fallback reason), so they
never contain an endpoint URL, an API key, a response body (providers echo masked keys in
401 bodies) or memory contents: a status code, an exception class name, a host at most.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memsvc.kernel.errors import UnavailableError

if TYPE_CHECKING:  # pragma: no cover
    from memsvc.kernel.embedding import Resolved


class EmbeddingError(UnavailableError):
    """An embedding could not be made (endpoint down, refused, bad answer, model missing)."""

    reason = "EMBEDDING_FAILED"


class EmbeddingURLRefused(EmbeddingError):
    """The outbound URL policy refused the endpoint; `problem` says why, without the URL."""

    reason = "EMBEDDING_URL_REFUSED"

    def __init__(self, problem: str, what: str = "embedding endpoint"):
        super().__init__(f"{what} refused by the URL policy: it {problem}")
        self.problem = problem


class NoEmbeddingSource(EmbeddingError):
    """The settings resolve to no source (keyword search only); `resolved.reason` says why."""

    reason = "NO_EMBEDDING_SOURCE"

    def __init__(self, resolved: Resolved):
        super().__init__(resolved.reason)
        self.resolved = resolved


class EmbeddingNotReady(EmbeddingError):
    """The source is still loading (or building its model) and the caller chose not to wait."""

    reason = "EMBEDDING_NOT_READY"


class RerankError(UnavailableError):
    """A rerank call failed; the engine keeps the original order (fail open)."""

    reason = "RERANK_FAILED"
