"""The embedding port: what a source is and what resolving one says, as the use cases, the
engine status and the adapters in `memsvc.embedding` all see it. Plain data and protocols:
no model library, no network."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np

T = TypeVar("T")

NOT_LOADED = "not_loaded"  # loads on first use (the first requests fall back meanwhile)
LOADING = "loading"  # loading, or building the model first: see phase and progress
READY = "ready"
FAILED = "failed"  # the last attempt failed; the reason says why


@dataclass(frozen=True)
class LoadState:
    """Whether a source can answer now; while it cannot, what it is doing (`phase`) and how
    far along (`progress` 0..1, None where it cannot be measured)."""

    state: str
    phase: str = ""
    progress: float | None = None

    @property
    def ready(self) -> bool:
        return self.state == READY


@runtime_checkable
class EmbeddingSource(Protocol):
    """What the resolver and the engine use. `embed` returns (len(texts), dimensions) float32
    with L2-normalized rows, or raises EmbeddingError (message free of credentials)."""

    name: str  # remote | static | transformers
    model: str
    #: Whether `embed` waits (a network call, a model too slow for the event loop's thread):
    #: an inline call (memsvc.kernel.inline) hands such an embedding to a worker thread.
    waits: bool

    @property
    def dimensions(self) -> int | None: ...

    @property
    def loaded(self) -> bool: ...

    @property
    def load_state(self) -> LoadState: ...

    def warm(self) -> None: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class EmbeddingStatus:
    """GetEngineStatus' embedding part. `available` is true only when the source can answer
    now (`state` ready): a model that is still loading or not loaded yet cannot, and requests
    fall back to keywords meanwhile; `phase` and `progress` say how far a load has got."""

    source: str
    model: str | None
    dimensions: int | None
    state: str
    phase: str
    progress: float | None
    loaded: bool
    signature: str | None
    reason: str
    cache_stats: dict[str, int]

    @property
    def available(self) -> bool:
        return self.state == "ready"


@dataclass(frozen=True)
class Resolved:
    """The source the settings select (None: keyword only) and why. `signature` is
    `source:model:dim[:int8]`, None while a remote source's dimension is not yet known
    (it is learned from the first answer; `Embeddings.embed` returns a fresh Resolved)."""

    source: EmbeddingSource | None
    reason: str
    quantization: str = "none"

    @property
    def name(self) -> str:
        return self.source.name if self.source is not None else "none"

    @property
    def model(self) -> str | None:
        return self.source.model if self.source is not None else None

    @property
    def dimensions(self) -> int | None:
        return self.source.dimensions if self.source is not None else None

    @property
    def signature(self) -> str | None:
        if self.source is None:
            return None
        dim = self.source.dimensions
        if dim is None:
            return None
        suffix = ":int8" if self.quantization == "int8" else ""
        return f"{self.source.name}:{self.source.model}:{dim}{suffix}"


def apply_rerank(items: Sequence[T], ranking: Sequence[tuple[int, float]]) -> list[tuple[T, float | None]]:
    """Items in the reranker's order with score = relevance_score, then the items it did not
    mention, in their original order, with score None (the caller keeps their own score).
    Indices out of range and repeats are ignored."""
    items = list(items)
    placed: set[int] = set()
    out: list[tuple[T, float | None]] = []
    for index, score in sorted(ranking, key=lambda pair: pair[1], reverse=True):
        if isinstance(index, int) and 0 <= index < len(items) and index not in placed:
            placed.add(index)
            out.append((items[index], float(score)))
    out.extend((item, None) for i, item in enumerate(items) if i not in placed)
    return out
