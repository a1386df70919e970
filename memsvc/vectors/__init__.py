"""The vector tiers: sqlite-vec (tier 1, embedded) and Qdrant (tier 2, opt-in)
behind one small protocol (`memsvc.vectors.index`). No grpc here; only `memsvc.storage`
knows the SQLite binding (the sqlite-vec tier runs SQL on the connections a `Database`
yields)."""

from memsvc.vectors.index import (
    DeleteResult,
    DimensionMismatch,
    VectorError,
    VectorHit,
    VectorIndex,
    VectorRow,
    VectorUnavailable,
)

__all__ = [
    "DeleteResult",
    "DimensionMismatch",
    "VectorError",
    "VectorHit",
    "VectorIndex",
    "VectorRow",
    "VectorUnavailable",
]
