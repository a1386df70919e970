"""The vector tiers' one small protocol (`memsvc.vectors.index`) and Qdrant (tier 2,
opt-in). The sqlite-vec index (tier 1, embedded) is SQLite storage and lives in
`memsvc.storage.vector_index`, so one package owns every SQL statement. No grpc here."""

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
