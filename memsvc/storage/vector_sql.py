"""The vector part of the storage seam: what `LocalVectorIndex` (memsvc.storage.vector_index,
which holds the tier's rules once) asks of the SQL that stores vectors next to the memories,
and the pieces both stores share. Two implementations, differing in their tables, their
statements and how an owner's vectors held in memory are kept current: sqlite-vec's `vec0`
table in the SQLite file (memsvc.storage.sqlite_vec) and pgvector's column with an HNSW
index in PostgreSQL (memsvc.storage.postgres.pgvector).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from memsvc.kernel.models import Memory, SearchScope
from memsvc.kernel.vector_index import DimensionMismatch, VectorHit, VectorRow
from memsvc.storage.vector_cache import NO_SESSION, OwnerBlock

QUANTIZATIONS = ("none", "int8")
INT8_SUFFIX = ":int8"
#: vec0 refuses k above 4096 in a KNN query; pgvector's searches are clamped alike.
MAX_K = 4096
DEFAULT_TOP_K = 20
#: A batch to write: each row with its vector as float32.
Prepared = list[tuple[VectorRow, np.ndarray]]


def make_signature(source: str, model: str, dim: int, quantization: str = "none") -> str:
    """`source:model:dim`, plus `:int8` when vectors are stored quantized."""
    base = f"{source}:{model}:{int(dim)}"
    return base + INT8_SUFFIX if quantization == "int8" else base


_SIGNATURE_DIM = re.compile(r":(\d+)(?::int8)?$")


def signature_dim(signature: str | None) -> int | None:
    """The dimension encoded in a `source:model:dim[:int8]` signature, if any."""
    match = _SIGNATURE_DIM.search(signature or "")
    return int(match[1]) if match else None


@dataclass(frozen=True)
class VecState:
    """The recorded signature and dimension, plus whether the vectors table exists now."""

    signature: str | None
    active_dim: int | None
    last_reset_at: datetime | None
    vec_loaded: bool
    table_exists: bool


def memory_ids(items: Iterable[Any]) -> list[int]:
    """The distinct integer memory ids of ints or of objects with `.memory_id` (Memory,
    VectorRow), in order; TypeError for anything else (a public UUID is not a vector key)."""
    ids = [getattr(item, "memory_id", item) for item in items]
    wrong = next((i for i in ids if isinstance(i, bool) or not isinstance(i, (int, np.integer))), None)
    if wrong is not None:
        raise TypeError(f"vector keys are integer memory ids, not {type(wrong).__name__}")
    return list(dict.fromkeys(int(i) for i in ids))


def fresh_rows(
    prepared: Prepared, current: dict[int, tuple[Any, ...]], dim: int, table: str
) -> dict[int, tuple[VectorRow, np.ndarray]]:
    """The rows embedded from their memory's current (key, content), the first two fields of
    `current`, by memory id: a slow embedding never attaches a stale vector, and of two rows
    of one memory the later wins. DimensionMismatch when a vector has another dimension."""
    for _, vec in prepared:
        if vec.shape[0] != dim:
            raise DimensionMismatch(dim, int(vec.shape[0]), table)
    return {
        int(row.memory_id): (row, vec)
        for row, vec in prepared
        if current.get(int(row.memory_id), (None, None))[:2] == (row.key, row.content)
    }


def vector_scope(
    scope: SearchScope, mark: str, time: Callable[[datetime], Any], unexpired: str, retained: str
) -> tuple[list[str], list[Any]]:
    """The scope as WHERE fragments on a vectors table's own filter columns (alias v), so the
    nearest-neighbour scan itself applies it: the owner, the session ('' = none), not expired
    (`unexpired`, bound to `time(scope.now)`) and inside retention unless kept (`retained`,
    bound to `time(scope.created_after)`). The same rule as `dialect.scope_clause` on memories."""
    clauses: list[str] = []
    params: list[Any] = []
    if scope.api_key_id is not None:
        clauses.append(f"v.api_key_id = {mark}")
        params.append(scope.api_key_id)
    if scope.session_only:
        clauses.append(f"v.session_id = {mark}")
        params.append(scope.session_id or NO_SESSION)
    clauses.append(unexpired)
    params.append(time(scope.now))
    if scope.created_after is not None:
        clauses.append(retained)
        params.append(time(scope.created_after))
    return clauses, params


class VectorSql(Protocol):
    """What differs between the stores' vector tables. `conn` is the store's connection, in
    a transaction the index opened (or the caller holds, for the *_in_transaction calls)."""

    name: str
    table: str
    max_dim: int
    quantization: str
    #: Placeholder of the store's driver, and the rules that read `memories` rows.
    mark: str
    memory_columns: str
    #: Added to pending()'s WHERE when vectors can exist: the memory has no usable vector.
    missing: str
    #: The owners' vectors in memory (None: every search in SQL); its type is the store's.
    cache: Any
    int8_refused: str

    def version(self) -> str | None: ...
    def unavailable(self) -> str: ...
    def record_unavailable(self) -> None: ...
    def state(self, conn: Any) -> VecState: ...
    def reset(self, conn: Any, signature: str, dim: int) -> bool: ...
    def has_vectors(self, conn: Any) -> bool: ...
    def upsert(self, conn: Any, prepared: Prepared, rows_written_here: bool) -> int: ...
    def write_failed(self, conn: Any) -> bool: ...
    def update_scope(self, conn: Any, memories: Sequence[Memory]) -> int: ...
    def delete(self, conn: Any, ids: list[int]) -> int: ...
    def mark_failed(self, conn: Any, ids: list[int]) -> int: ...
    def prune(self, conn: Any) -> int: ...
    def search(self, scope: SearchScope, vec: np.ndarray, k: int) -> list[VectorHit]: ...
    def dimension(self, conn: Any) -> int | None: ...
    def owner_block(self, conn: Any, owner: str, dim: int) -> OwnerBlock | None: ...
    def memories_in_scope(self, conn: Any, ids: list[int], scope: SearchScope) -> Iterable[Memory]: ...
    def scope_clause(self, scope: SearchScope, alias: str) -> tuple[str, list[Any]]: ...
    def row_to_memory(self, row: Sequence[Any]) -> Memory: ...
    def nothing_pending(self, owner: str) -> bool: ...
    def stored_vector(self, conn: Any, memory_id: int) -> bytes | None: ...
