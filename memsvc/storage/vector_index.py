"""Tier 1: the vectors stored in the same database as the memories, one implementation for
both stores (sqlite-vec in the SQLite file, pgvector in PostgreSQL).

Why one class: the rules of the tier are the same on both stores and must stay so (the
contract suite tests/contract/test_vector_index_contract.py runs every one on each): which
vectors are fresh (embedded from the memory's current key and content), what is pending
(flagged for re-embedding, or no vector row), that the scope is applied inside the
nearest-neighbour scan and re-checked on the joined `memories` row (a stale filter column only
costs a slot), that an owner's search is answered from its vectors in memory when a cache
budget is set, and that every method copes with the vectors table not existing yet (searches
return nothing, counts are 0, pending() returns every memory, deletes are no-ops; nothing can
raise "no such table"). The statements, tables and cache coherence of each store are its
`VectorSql` (memsvc.storage.vector_sql), which says why they are as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from memsvc.kernel.models import Memory, SearchScope
from memsvc.kernel.vector_index import (
    DeleteResult,
    DimensionMismatch,
    VectorError,
    VectorHit,
    VectorRow,
    VectorUnavailable,
    as_vector,
)
from memsvc.storage.database import Database, iso
from memsvc.storage.sqlite_vec import DEFAULT_CHUNK_SIZE, SqliteVecSql
from memsvc.storage.vector_cache import HeldMemories, block_hits
from memsvc.storage.vector_sql import DEFAULT_TOP_K, INT8_SUFFIX, MAX_K, Prepared, VecState, VectorSql, memory_ids


def vector_sql(db: Any, quantization: str, chunk_size: int, cache_bytes: int) -> VectorSql:
    """The store's vector SQL: sqlite-vec for a SQLite `Database`, pgvector otherwise (its
    module is imported only then: a SQLite install has no PostgreSQL client)."""
    if isinstance(db, Database):
        return SqliteVecSql(db, quantization=quantization, chunk_size=chunk_size, cache_bytes=cache_bytes)
    if quantization != "none":
        raise ValueError("pgvector stores float32 vectors only: quantization must be 'none'")
    from memsvc.storage.postgres.pgvector import PgVectorSql

    return PgVectorSql(db, cache_bytes=cache_bytes)


class LocalVectorIndex:
    """The vectors of one database (see the module docstring).

    `quantization`: "none" (float32) or "int8" (sqlite-vec only; the lead reads
    `MEMORY_VEC_QUANTIZATION`). `chunk_size`: vec0's chunk size, a multiple of 8.
    `cache_bytes`: the budget of owners' vectors in memory (0: every search in SQL).
    `held_memories`: where a search from memory gets its hits' rows without a statement (the
    memory backend's working sets); None, or an owner they do not hold: one read of the rows.
    """

    def __init__(
        self,
        db: Any,
        *,
        quantization: str = "none",
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        default_k: int = DEFAULT_TOP_K,
        cache_bytes: int = 0,
        held_memories: HeldMemories | None = None,
    ) -> None:
        self.db = db
        self.sql = vector_sql(db, quantization, chunk_size, cache_bytes)
        self.name = self.sql.name
        self.quantization = self.sql.quantization
        self.default_k = max(1, min(MAX_K, int(default_k)))
        self.held_memories = held_memories

    @property
    def cache(self) -> Any:
        """The owners' vectors in memory (the store's kind), None without a budget."""
        return self.sql.cache

    @property
    def vec_version(self) -> str | None:
        """The vector extension's version (loaded, or installable by ensure()); None without."""
        return self.sql.version()

    @property
    def available(self) -> bool:
        return self.vec_version is not None

    def _require_available(self) -> None:
        if not self.available:
            raise VectorUnavailable(self.sql.unavailable())

    def __getattr__(self, name: str) -> Any:
        """What only one store has (pgvector's explain_search, exact_fallbacks) is its SQL's."""
        if name == "sql":
            raise AttributeError(name)
        return getattr(self.sql, name)

    # -- set-up ----------------------------------------------------------------------------

    def state(self) -> VecState:
        with self.db.read() as conn:
            return self.sql.state(conn)

    def effective_signature(self, signature: str) -> str:
        """The signature as recorded: with `:int8` when this index quantizes."""
        quantized = signature.endswith(INT8_SUFFIX)
        if quantized and self.quantization != "int8":
            raise VectorError(self.sql.int8_refused)
        if self.quantization == "int8" and not quantized:
            return signature + INT8_SUFFIX
        return signature

    def ensure(self, signature: str, dim: int) -> bool:
        """Make the vectors table match `signature` and `dim`. When the recorded signature
        differs (or the table is missing), in ONE write transaction: drop and recreate the
        table, set `needs_reindex` on every memory, record the signature, dimension and reset
        time. True when it reset; False when everything already matched (a read, no write)."""
        if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= self.sql.max_dim:
            raise VectorError(f"dimension must be an integer between 1 and {self.sql.max_dim}")
        if not signature or not isinstance(signature, str):
            raise VectorError("an embedding signature is required")
        if not self.available:
            self.sql.record_unavailable()
            self._require_available()
        wanted = self.effective_signature(signature)
        current = self.state()
        if current.signature == wanted and current.active_dim == dim and current.table_exists and current.vec_loaded:
            return False
        with self.db.write() as conn:
            return self.sql.reset(conn, wanted, dim)

    # -- vectors -------------------------------------------------------------------------

    def see_own_writes(self) -> None:
        """Inside a request's snapshot: let the rest of it see what this thread just wrote."""
        self.db.renew_read()

    def _prepare(self, rows: Sequence[VectorRow]) -> Prepared:
        self._require_available()
        return [(row, as_vector(row.vector)) for row in rows]

    def upsert(self, rows: Sequence[VectorRow]) -> int:
        """Insert or replace the vectors and clear `needs_reindex` of those memories, in one
        write transaction. A row is skipped (and stays pending) when its memory no longer
        exists or its key/content changed since it was embedded, so a slow embedding can
        never attach a stale vector or clear the flag of a newer edit. Returns how many
        vectors were written."""
        if not rows:
            return 0
        prepared = self._prepare(rows)
        with self.db.write() as conn:
            return self.sql.upsert(conn, prepared, False)

    def upsert_in_transaction(self, conn: Any, rows: Sequence[VectorRow]) -> int:
        """`upsert` inside a write transaction the caller holds (the one that writes the
        memories, so a new memory and its vector commit together). All or nothing in its
        own savepoint: on failure its statements are undone, the caller's transaction goes
        on, and VectorError is raised (any other error only when the database ended the
        caller's whole transaction: SQLite rolled it back, or the connection was lost)."""
        if not rows:
            return 0
        prepared = self._prepare(rows)
        try:
            with self.db.savepoint(conn):
                return self.sql.upsert(conn, prepared, True)
        except Exception as exc:
            if self.sql.write_failed(conn) or isinstance(exc, VectorError):
                raise
            raise VectorError(f"{self.name} write failed ({type(exc).__name__}: {str(exc)[:200]})") from exc

    def update_scope(self, memories: Sequence[Memory]) -> int:
        """Bring the filter columns (session, creation, expiry, keep) of existing vectors up
        to date without re-embedding, e.g. after an upsert moved a memory to another session
        with the same content. The owner is left alone (a memory never changes owner).
        Returns how many vectors were updated."""
        if not memories or not self.available:
            return 0
        with self.db.write() as conn:
            return self.sql.update_scope(conn, memories) if self.sql.has_vectors(conn) else 0

    def delete(self, ids: Sequence[Any]) -> DeleteResult:
        """Delete the vectors of these memories (integer memory ids, or objects with
        `.memory_id`). No table → nothing to delete."""
        keys = memory_ids(ids)
        if not keys or not self.available:
            return DeleteResult(0)
        with self.db.write() as conn:
            return DeleteResult(self.sql.delete(conn, keys))

    def delete_in_transaction(self, conn: Any, ids: Iterable[Any]) -> int:
        """Delete vectors inside a write transaction the caller holds (together with the
        `memories` rows, so a crash leaves neither half). No table → 0."""
        keys = memory_ids(ids)
        return self.sql.delete(conn, keys) if keys else 0

    def mark_failed(self, ids: Sequence[Any]) -> int:
        """Embedding failed for these memories: set `needs_reindex` and remove their now
        stale vectors (a vector of the old content would match the old meaning), in one
        transaction. Returns how many memories were marked."""
        keys = memory_ids(ids)
        if not keys:
            return 0
        with self.db.write() as conn:
            return self.sql.mark_failed(conn, keys)

    def mark_failed_in_transaction(self, conn: Any, ids: Sequence[Any]) -> int:
        """`mark_failed` inside a write transaction the caller holds (the one that wrote
        those memories, when their vectors could not be written with them)."""
        keys = memory_ids(ids)
        return self.sql.mark_failed(conn, keys) if keys else 0

    def prune_orphans(self) -> int:
        """Delete vectors whose memory no longer exists (left by a failed clean-up; searches
        join `memories`, so they are never returned, but they take space and count)."""
        if not self.available:
            return 0
        with self.db.write() as conn:
            return self.sql.prune(conn) if self.sql.has_vectors(conn) else 0

    # -- reads ---------------------------------------------------------------------------

    def search(self, scope: SearchScope, vector: Sequence[float] | np.ndarray, k: int | None = None) -> list[VectorHit]:
        """The k nearest memories in scope, nearest first, ties by memory_id (k defaults to
        `default_k`, clamped to [1, 4096]). An owner's search is answered from its vectors in
        memory when the cache holds them, else by the store's nearest-neighbour statement
        with the scope inside the scan. No table yet → []."""
        return self.search_many(scope, [vector], k)[0]

    def search_many(
        self, scope: SearchScope, vectors: Sequence[Sequence[float] | np.ndarray], k: int | None = None
    ) -> list[list[VectorHit]]:
        """`search` for several query vectors in one scope: an owner's cached vectors answer
        them all in one snapshot and one matrix product (the duplicate check of a batch)."""
        self._require_available()
        k = self.default_k if k is None else max(1, min(MAX_K, int(k)))
        queries = [as_vector(vector) for vector in vectors]
        if not queries:
            return []
        if self.sql.cache is not None and scope.api_key_id is not None:
            hits = self._search_cached(scope, queries, k)
            if hits is not None:
                return hits
        return [self.sql.search(scope, query, k) for query in queries]

    def _search_cached(self, scope: SearchScope, queries: list[np.ndarray], k: int) -> list[list[VectorHit]] | None:
        """The owner's k nearest of each query from its block in memory, with their rows;
        None when the store must answer (a snapshot the cache cannot serve, an owner over the
        budget)."""
        assert scope.api_key_id is not None
        with self.db.read() as conn:
            dim = self.sql.dimension(conn)
            if dim is None:
                return [[] for _ in queries]
            for query in queries:
                if query.shape[0] != dim:
                    raise DimensionMismatch(dim, int(query.shape[0]), self.sql.table)
            block = self.sql.owner_block(conn, scope.api_key_id, dim)
            if block is None:
                return None
            return block_hits(
                conn,
                scope,
                block.nearest(scope, np.stack(queries), k),
                self.held_memories,
                lambda ids: self.sql.memories_in_scope(conn, ids, scope),
            )

    def pending_for_search(self, scope: SearchScope, limit: int) -> list[Memory]:
        """`pending(owner, limit, scope=scope)` for the lazy backfill that runs before every
        search, without scanning every row of the owner each time: when the store knows
        cheaply that the owner has nothing pending (the usual case), nothing is read."""
        owner = scope.api_key_id
        if owner is not None and self.available and self.sql.nothing_pending(owner):
            return []
        return self.pending(owner, limit, scope=scope)

    def _pending_where(self, conn: Any, api_key_id: str | None, scope: SearchScope | None) -> tuple[str, list[Any]]:
        # Without the table (or the extension) no memory has a usable vector: all pending.
        clauses = [self.sql.missing] if self.sql.has_vectors(conn) else []
        params: list[Any] = []
        if api_key_id is not None:
            clauses.append(f"m.api_key_id = {self.sql.mark}")
            params.append(api_key_id)
        if scope is not None:
            where, scope_params = self.sql.scope_clause(scope, "m")
            clauses.append(where)
            params.extend(scope_params)
        return (" AND ".join(clauses) or "true"), params

    def pending(
        self,
        api_key_id: str | None = None,
        limit: int = 100,
        *,
        scope: SearchScope | None = None,
        before_memory_id: int | None = None,
    ) -> list[Memory]:
        """Memories that need a vector: `needs_reindex`, or no vector row. Newest first
        (highest memory_id), at most `limit` (lazy backfill is bounded per request).
        `scope` narrows to what a search could return (owner, session, not expired, within
        retention), so lazy backfill never embeds rows the search would filter out;
        `before_memory_id` pages downwards (a batch loop that skips rows it failed on)."""
        limit = max(0, int(limit))
        if limit == 0:
            return []
        mark = self.sql.mark
        with self.db.read() as conn:
            where, params = self._pending_where(conn, api_key_id, scope)
            if before_memory_id is not None:
                where += f" AND m.memory_id < {mark}"
                params.append(int(before_memory_id))
            rows = conn.execute(
                f"SELECT {self.sql.memory_columns} FROM memories m WHERE {where} "
                f"ORDER BY m.memory_id DESC LIMIT {mark}",
                [*params, limit],
            ).fetchall()
        return [self.sql.row_to_memory(r) for r in rows]

    def pending_count(self, api_key_id: str | None = None) -> int:
        with self.db.read() as conn:
            where, params = self._pending_where(conn, api_key_id, None)
            return int(conn.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone()[0])

    def count(self) -> int:
        """Vectors stored (0 before the table exists or without the extension)."""
        if not self.available:
            return 0
        with self.db.read() as conn:
            if not self.sql.has_vectors(conn):
                return 0
            return int(conn.execute(f"SELECT count(*) FROM {self.sql.table}").fetchone()[0])

    def stored_vector(self, memory_id: int) -> bytes | None:
        """The raw stored vector of one memory, as sqlite-vec stores it (float32: 4 × dim
        little-endian bytes; int8: dim bytes)."""
        if not self.available:
            return None
        with self.db.read() as conn:
            return self.sql.stored_vector(conn, int(memory_id)) if self.sql.has_vectors(conn) else None

    def health(self) -> dict[str, Any]:
        """Measured, never assumed: {ok, backend, vec_version, error, table_exists,
        signature, active_dim, quantization, last_reset_at, rows, pending}."""
        result: dict[str, Any] = {
            "ok": False,
            "backend": self.name,
            "vec_version": None,
            "error": None,
            "quantization": self.quantization,
        }
        try:
            result["vec_version"] = self.vec_version
            state = self.state()
            result.update(
                table_exists=state.table_exists,
                signature=state.signature,
                active_dim=state.active_dim,
                last_reset_at=iso(state.last_reset_at),
                rows=self.count(),
                pending=self.pending_count(),
            )
            if result["vec_version"] is None:
                result["error"] = self.sql.unavailable()
            elif not state.table_exists:
                result["error"] = "no vectors yet: the dimension is learned from the first embedding"
            else:
                result["ok"] = True
        except Exception as exc:  # noqa: BLE001 - a probe reports, it does not raise
            result["error"] = f"{type(exc).__name__}: {exc}"
        return result
