"""What both vector tiers implement, and the values they exchange.

Keys: a memory has a public UUID `id` and an integer `memory_id` (the row id FTS5 and vec0
join on). sqlite-vec keys its rows by `memory_id`; Qdrant keys its points by `id` (and keeps
`memory_id` in the payload). Both tiers accept, wherever they take keys, any object with
`.id` and `.memory_id` (a `Memory`, a `VectorRow`), so the engine never has to know which key
a tier wants.

Scores: every hit carries `distance` (cosine distance, 0 = same direction, 2 = opposite) and
`score` (higher is better). For sqlite-vec `score = 1 / (1 + distance)`. For
Qdrant `score` is what Qdrant returns for a Cosine collection, the cosine similarity in
[-1, 1], and `distance = 1 - score`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import numpy as np

from memsvc.kernel.models import Memory, SearchScope


class VectorError(Exception):
    """A vector tier could not do what was asked. The engine falls back (sqlite-vec, then
    FTS5) and reports `str(exc)` as the fallback reason, so messages never hold secrets or
    memory contents."""


class DimensionMismatch(VectorError):
    """A vector's length differs from the index's dimension (Qdrant: the collection's
    configured size; sqlite-vec: `memory_vec_meta.active_dim`)."""

    def __init__(self, expected: int, got: int, where: str):
        super().__init__(f"dimension mismatch: {where} has {expected} dimensions, the vector has {got}")
        self.expected = expected
        self.got = got


class VectorUnavailable(VectorError):
    """The tier itself is down or not set up (sqlite-vec not loaded, Qdrant unreachable)."""


@dataclass(frozen=True, eq=False)
class VectorRow:
    """One memory's vector plus what the tiers filter on (owner, session, creation, expiry)
    and what Qdrant keeps in its payload (key, content, metadata). Compared by identity (a
    numpy array has no single truth value)."""

    memory_id: int
    id: str
    api_key_id: str
    session_id: str | None
    key: str | None
    content: str
    metadata: dict[str, Any]
    created_at: datetime
    expires_at: datetime | None
    vector: np.ndarray = field(repr=False)
    #: Kept with no age limit: the retention filters of every tier let it through.
    keep: bool = False

    @classmethod
    def from_memory(cls, memory: Memory, vector: Sequence[float] | np.ndarray) -> VectorRow:
        return cls(
            memory_id=memory.memory_id,
            id=memory.id,
            api_key_id=memory.api_key_id,
            session_id=memory.session_id,
            key=memory.key,
            content=memory.content,
            metadata=dict(memory.metadata),
            created_at=memory.created_at,
            expires_at=memory.expires_at,
            vector=as_vector(vector),
            keep=memory.keep,
        )


@dataclass(frozen=True)
class VectorHit:
    memory_id: int
    id: str
    distance: float
    score: float
    #: The memory itself when the index read its row anyway (sqlite-vec re-checks the scope
    #: in SQL), so the caller need not load it again; None otherwise.
    memory: Memory | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class DeleteResult:
    """`deleted`: how many vectors existed and were removed. `error`: why a best-effort
    delete failed (None when it worked)."""

    deleted: int
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@runtime_checkable
class VectorIndex(Protocol):
    name: str

    def ensure(self, signature: str, dim: int) -> bool:
        """Make the index ready for vectors of `dim` dimensions made by `signature`
        (`source:model:dim`). True when it reset (sqlite-vec: a new signature dropped the
        table and marked every memory for reindex) or created the store (Qdrant: the
        collection); False when it was already ready."""

    def upsert(self, rows: Sequence[VectorRow]) -> int:
        """Insert or replace the vectors; returns how many were written."""

    def delete(self, ids: Sequence[Any]) -> DeleteResult:
        """Remove the vectors of these memories (see the module docstring for keys)."""

    def search(self, scope: SearchScope, vector: Sequence[float] | np.ndarray, k: int) -> list[VectorHit]:
        """The `k` nearest vectors within the scope, nearest first. The scope (owner,
        session, expiry, retention) is applied inside the nearest-neighbour search, never
        to a global top-k afterwards."""

    def count(self) -> int: ...

    def health(self) -> dict[str, Any]: ...


def as_vector(vector: Sequence[float] | np.ndarray) -> np.ndarray:
    """A contiguous 1-D float32 array; refuses empty, non-finite or all-zero vectors (cosine
    is undefined for them, and a NaN would poison every distance)."""
    arr = np.ascontiguousarray(np.asarray(vector, dtype=np.float32).reshape(-1))
    if arr.size == 0:
        raise VectorError("empty vector")
    # Array methods, not np.all/np.any: those wrappers cost more than the check itself, and
    # this runs for every vector written (a reindex: twice per row).
    if not np.isfinite(arr).all():
        raise VectorError("vector has non-finite values")
    if not arr.any():
        raise VectorError("zero vector (cosine distance is undefined)")
    return arr


def cosine_score(distance: float) -> float:
    """sqlite-vec's score: 1 / (1 + distance)."""
    return 1.0 / (1.0 + distance) if math.isfinite(distance) else 0.0


def normalized(vectors: np.ndarray) -> np.ndarray:
    """Rows as float32 of length 1 (a zero row stays zero): cosine becomes a dot product."""
    matrix = np.array(vectors, dtype=np.float32)  # a copy: the caller's array stays as it was
    if matrix.ndim == 1:
        norm = float(np.linalg.norm(matrix))
        return matrix / np.float32(norm) if norm > 0 else matrix
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    matrix /= norms
    return matrix


def best_first(sims: np.ndarray, keys: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k highest similarities, the highest first (the least cosine distance,
    1 - similarity), ties by the smaller key: one order for every top-k of the same data."""
    k = min(k, sims.size)
    top = np.argpartition(-sims, k - 1)[:k] if k < sims.size else np.arange(sims.size)
    distance = 1.0 - sims[top].astype(np.float64)
    ordered: np.ndarray = top[np.lexsort((keys[top], distance))]
    return ordered
