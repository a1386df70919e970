"""Tier 1: vectors inside the SQLite file, in a sqlite-vec `vec0` table.

`vec_memories` is created at run time, once the embedding dimension is known:

    CREATE VIRTUAL TABLE vec_memories USING vec0(
        chunk_size = 32,
        api_key_id  text partition key,      -- the owner: a KNN for one owner scans only
                                             -- that owner's chunks
        session_id  text,                    -- metadata column; '' = no session
        created_us  integer,                 -- creation, unix microseconds; NEVER_US = kept
        expires_us  integer,                 -- expiry, unix microseconds; NEVER_US = never
        embedding   float[DIM] distance_metric=cosine      -- or int8[DIM] (quantized)
    )

rowid = `memories.memory_id`. Why this shape:

- Partition key. sqlite-vec stores vectors in chunks, and with a partition key every chunk
  belongs to one owner; a KNN constrained on `api_key_id = ?` reads only that owner's
  chunks. A filter applied after a global top-k would silently lose an owner's results
  whenever other owners' vectors are nearer (the test with 5 far vectors against 5,000 near
  ones proves it does not happen here).
- Metadata columns. Session, expiry and retention are constraints of the same KNN query
  (sqlite-vec filters them while it scans), so the k nearest are the k nearest *in scope*.
  vec0 text metadata cannot be NULL, so "no session" is stored as '' (the core normalizes an
  empty session id to None, so '' never names a real session). Times are integers in
  microseconds, the same precision as the ISO text in `memories`, so `expires_us > now` and
  `created_us >= cutoff` agree exactly with the SQL filters of the keyword tier.
- chunk_size. Each partition allocates whole chunks (chunk_size × dim × 4 bytes): with
  vec0's default 1024, 200 owners of 5 memories plus one of 5,000 took 335 MB for 6,005
  384-d vectors and a global KNN 184 ms; with 32, 20 MB and 14 ms, while the big owner's
  KNN stayed about the same (8.6 vs 7.8 ms) — bench/vec_partition_bench.py.
- int8. With quantization (signature suffix `:int8`), vectors are stored as
  `vec_quantize_int8(?, 'unit')`, one byte per dimension. 'unit' maps [-1, 1] onto the
  int8 range, but the components of a unit-length 384-d vector are around ±0.05, which
  would use only a dozen of the 256 levels; so each vector is first scaled by
  1 / max|component| (cosine ignores scale, so this changes no distance) and then quantized
  (recall@20 on random 384-d vectors: 1.0 scaled vs 0.8 unscaled). The distance metric is
  cosine: sqlite-vec 0.1.9 supports l2, l1 and cosine for int8 columns (hamming is for bit
  vectors only); l1/l2 would depend on the per-vector scale, cosine does not.

A later read re-checks the scope on the joined `memories` row, so a vector whose metadata
went stale (or whose memory was deleted) can never surface a memory out of scope; it only
costs a slot. `update_scope()` keeps the metadata current without re-embedding.

Every method copes with the table not existing yet: searches return nothing, counts are 0,
pending() returns every memory, deletes are no-ops. Nothing here can raise "no such table"
(the reference failed that way on a fresh database).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from memsvc.kernel.inline import may_block
from memsvc.kernel.models import Memory, SearchScope, utcnow
from memsvc.storage.database import Database, iso, parse_iso
from memsvc.storage.keyword import rows_in_scope, scope_clause
from memsvc.storage.memory_rows import M_COLUMNS, row_to_memory
from memsvc.storage.sequences import bump_vec_generation, read_vec_generation
from memsvc.storage.vector_cache import (NEVER_US, NO_SESSION, HeldMemories, OwnerBlock, VectorCache, block_hits,
                                         scope_values, unix_us)
from memsvc.kernel.vector_index import (
    DeleteResult,
    DimensionMismatch,
    VectorError,
    VectorHit,
    VectorRow,
    VectorUnavailable,
    as_vector,
    cosine_score,
)

TABLE = "vec_memories"
QUANTIZATIONS = ("none", "int8")
INT8_SUFFIX = ":int8"
#: vec0 refuses k above 4096 in a KNN query.
MAX_K = 4096
#: sqlite-vec's largest vector column.
MAX_DIM = 8192
DEFAULT_TOP_K = 20
DEFAULT_CHUNK_SIZE = 32
_NO_SESSION = NO_SESSION
# NEVER_US ("never expires", and a kept memory's creation) and unix_us are the vector cache's
# (memsvc.storage.vector_cache), imported above so both stores' tiers share one definition.


def make_signature(source: str, model: str, dim: int, quantization: str = "none") -> str:
    """`source:model:dim`, plus `:int8` when vectors are stored quantized."""
    base = f"{source}:{model}:{int(dim)}"
    return base + INT8_SUFFIX if quantization == "int8" else base


@dataclass(frozen=True)
class VecState:
    """`memory_vec_meta` plus whether the table exists right now."""

    signature: str | None
    active_dim: int | None
    last_reset_at: datetime | None
    vec_loaded: bool
    table_exists: bool


def _table_exists(conn: Any) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)).fetchone() is not None


def _memory_ids(items: Iterable[Any]) -> list[int]:
    """Integer memory ids from ints or objects with `.memory_id` (Memory, VectorRow)."""
    out: list[int] = []
    for item in items:
        value = getattr(item, "memory_id", item)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"sqlite-vec keys are integer memory ids, not {type(value).__name__}")
        out.append(int(value))
    return list(dict.fromkeys(out))


def delete_in(conn: Any, memory_ids: Iterable[Any]) -> int:
    """Delete vectors inside a write transaction the caller already holds (e.g. together
    with the `memories` rows, so a crash leaves neither half). No table → 0."""
    ids = _memory_ids(memory_ids)
    if not ids or not _table_exists(conn):
        return 0
    found = _stored_owners(conn, ids)
    if found:
        conn.executemany(f"DELETE FROM {TABLE} WHERE rowid = ?", [(mid,) for mid in found])
        bump_vec_generation(conn)
    return len(found)


def _searchable_dim(conn: Any, vec: np.ndarray) -> int | None:
    """The table's dimension when a search can run (None: no table or no dimension yet, so
    nothing to find); DimensionMismatch when the query vector has another."""
    row = conn.execute("SELECT active_dim FROM memory_vec_meta WHERE id = 1").fetchone()
    dim = row[0] if row else None
    if dim is None or not _table_exists(conn):
        return None
    if vec.shape[0] != dim:
        raise DimensionMismatch(int(dim), int(vec.shape[0]), TABLE)
    return int(dim)


def _stored_owners(conn: Any, memory_ids: Sequence[int]) -> dict[int, str]:
    """{memory_id: owner (partition key)} of the ids that have a vector. One point lookup
    per id: vec0 answers `rowid = ?` from its rowid index, but `rowid IN (...)` scans the
    whole table (milliseconds per 20,000 vectors, for every call)."""
    if not memory_ids:
        return {}
    rows = conn.executemany(f"SELECT rowid, api_key_id FROM {TABLE} WHERE rowid = ?",
                            [(mid,) for mid in memory_ids]).fetchall()
    return {int(mid): owner for mid, owner in rows}


class SqliteVecIndex:
    """The sqlite-vec tier over one `Database` (see the module docstring).

    `quantization`: "none" (float32) or "int8" (the lead reads `MEMORY_VEC_QUANTIZATION`
    and passes it here). `chunk_size`: vec0 chunk size, a multiple of 8.
    """

    name = "sqlite-vec"

    def __init__(self, db: Database, *, quantization: str = "none", chunk_size: int = DEFAULT_CHUNK_SIZE,
                 default_k: int = DEFAULT_TOP_K, cache_bytes: int = 0,
                 held_memories: HeldMemories | None = None) -> None:
        if quantization not in QUANTIZATIONS:
            raise ValueError(f"quantization must be one of {', '.join(QUANTIZATIONS)}, not {quantization!r}")
        if chunk_size < 8 or chunk_size % 8:
            raise ValueError("chunk_size must be a positive multiple of 8")
        self.db = db
        self.quantization = quantization
        self.chunk_size = int(chunk_size)
        self.default_k = max(1, min(MAX_K, int(default_k)))
        #: Per-owner in-memory matrices (memsvc.storage.vector_cache); None = search in SQLite.
        self.cache: VectorCache | None = VectorCache(cache_bytes) if cache_bytes > 0 else None
        #: Where a cached search's hits get their rows without a statement (the memory
        #: backend's working sets); None, or an owner they do not hold: one read of the rows.
        self.held_memories = held_memories

    # -- cache coherence -------------------------------------------------------------------

    def _changed(self, conn: Any, change: Any = None) -> None:
        """Inside a write transaction that changed vectors: bump the generation and apply
        `change(cache)` to this process's cache (None = drop the whole cache)."""
        gen = bump_vec_generation(conn)
        cache = self.cache
        if cache is None:
            return
        cache.apply(gen, change if change is not None else (lambda c: c._reset(gen)))
        self.db.on_rollback(cache.invalidate)

    def delete_in_transaction(self, conn: Any, memory_ids: Iterable[Any]) -> int:
        """`delete_in` for a transaction the caller holds (the memories delete hook), keeping
        this index's cache in step."""
        ids = _memory_ids(memory_ids)
        deleted = delete_in(conn, ids)
        if deleted and self.cache is not None:
            gen = read_vec_generation(conn)
            self.cache.apply(gen, lambda c: _remove_ids(c, ids))
            self.db.on_rollback(self.cache.invalidate)
        return deleted

    # -- state ---------------------------------------------------------------------------

    @property
    def available(self) -> bool:
        return self.db.vec_version is not None

    def _require_loaded(self) -> None:
        if self.db.vec_version is None:
            raise VectorUnavailable(f"sqlite-vec is not loaded ({self.db.vec_error or 'unknown error'})")

    def state(self) -> VecState:
        with self.db.read() as conn:
            row = conn.execute("SELECT embedding_signature, active_dim, last_reset_at, vec_loaded "
                               "FROM memory_vec_meta WHERE id = 1").fetchone()
            exists = _table_exists(conn)
        signature, dim, reset_at, loaded = row if row else (None, None, None, 0)
        return VecState(signature, int(dim) if dim is not None else None, parse_iso(reset_at), bool(loaded), exists)

    def effective_signature(self, signature: str) -> str:
        """The signature as recorded: with `:int8` when this index quantizes."""
        quantized = signature.endswith(INT8_SUFFIX)
        if quantized and self.quantization != "int8":
            raise VectorError("the signature asks for int8 vectors but this index stores float32 "
                              "(set MEMORY_VEC_QUANTIZATION=int8)")
        if self.quantization == "int8" and not quantized:
            return signature + INT8_SUFFIX
        return signature

    def _create_sql(self, dim: int) -> str:
        column = f"int8[{dim}]" if self.quantization == "int8" else f"float[{dim}]"
        return (f"CREATE VIRTUAL TABLE {TABLE} USING vec0(chunk_size={self.chunk_size}, "
                "api_key_id text partition key, session_id text, created_us integer, expires_us integer, "
                f"embedding {column} distance_metric=cosine)")

    def ensure(self, signature: str, dim: int) -> bool:
        """Make `vec_memories` match `signature` and `dim`.

        When the recorded signature differs (or the table is missing), in ONE write
        transaction: drop and recreate `vec_memories`, set `needs_reindex = 1` on every
        memory, record signature, active_dim, last_reset_at and vec_loaded. Returns True when
        it reset, False when everything already matched (a cheap read, no write).
        """
        if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= MAX_DIM:
            raise VectorError(f"dimension must be an integer between 1 and {MAX_DIM}")
        if not signature or not isinstance(signature, str):
            raise VectorError("an embedding signature is required")
        if self.db.vec_version is None:
            self._record_unloaded()
            self._require_loaded()
        wanted = self.effective_signature(signature)
        current = self.state()
        if (current.signature == wanted and current.active_dim == dim and current.table_exists
                and current.vec_loaded):
            return False
        with self.db.write() as conn:
            # Re-read under the write lock: another writer may have done it meanwhile.
            row = conn.execute("SELECT embedding_signature, active_dim, vec_loaded FROM memory_vec_meta "
                               "WHERE id = 1").fetchone()
            exists = _table_exists(conn)
            if row and row[0] == wanted and row[1] == dim and exists:
                if not row[2]:
                    conn.execute("UPDATE memory_vec_meta SET vec_loaded = 1 WHERE id = 1")
                return False
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
            conn.execute(self._create_sql(dim))
            conn.execute("UPDATE memories SET needs_reindex = 1 WHERE needs_reindex = 0")
            self._changed(conn)
            conn.execute(
                "INSERT INTO memory_vec_meta (id, active_dim, embedding_signature, last_reset_at, vec_loaded) "
                "VALUES (1, ?, ?, ?, 1) ON CONFLICT(id) DO UPDATE SET active_dim = excluded.active_dim, "
                "embedding_signature = excluded.embedding_signature, last_reset_at = excluded.last_reset_at, "
                "vec_loaded = 1",
                (dim, wanted, iso(utcnow())),
            )
        return True

    def _record_unloaded(self) -> None:
        """Keep `vec_loaded` truthful when the extension failed to load (only writes on a
        change)."""
        with self.db.read() as conn:
            row = conn.execute("SELECT vec_loaded FROM memory_vec_meta WHERE id = 1").fetchone()
        if row and row[0]:
            with self.db.write() as conn:
                conn.execute("UPDATE memory_vec_meta SET vec_loaded = 0 WHERE id = 1")

    def _ready_dim(self, conn: Any) -> int:
        """The active dimension, recreating the table if it went missing while a signature
        is recorded. Raises when ensure() was never called (no dimension known yet)."""
        row = conn.execute("SELECT active_dim, embedding_signature FROM memory_vec_meta WHERE id = 1").fetchone()
        dim = row[0] if row else None
        if dim is None or not row[1]:
            raise VectorError("the vector index is not set up yet: call ensure(signature, dim) first")
        if not _table_exists(conn):
            conn.execute(self._create_sql(int(dim)))
            self._changed(conn)
        return int(dim)

    # -- vectors -------------------------------------------------------------------------

    def _param(self, vector: np.ndarray) -> bytes:
        if self.quantization == "int8":
            # Scale so the largest component is ±1: cosine ignores scale, int8 resolution is
            # then used in full (see the module docstring).
            vector = vector / np.float32(np.abs(vector).max())
        return np.ascontiguousarray(vector, dtype=np.float32).tobytes()

    def _value_sql(self) -> str:
        return "vec_quantize_int8(?, 'unit')" if self.quantization == "int8" else "?"

    def see_own_writes(self) -> None:
        """Inside a request's snapshot: let the rest of it see what this thread just wrote."""
        self.db.renew_read()

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
            return self._upsert_in(conn, prepared)

    def upsert_in_transaction(self, conn: Any, rows: Sequence[VectorRow]) -> int:
        """`upsert` inside a write transaction the caller holds (the one that writes the
        memories, so a new memory and its vector commit together). All or nothing in its
        own savepoint: on failure its statements are undone, this process's cache is
        dropped, the caller's transaction goes on, and VectorError is raised (any other
        error only when SQLite rolled back the caller's whole transaction)."""
        if not rows:
            return 0
        prepared = self._prepare(rows)
        try:
            with self.db.savepoint(conn):
                return self._upsert_in(conn, prepared)
        except Exception as exc:
            if self.cache is not None:
                self.cache.invalidate()
            if isinstance(exc, VectorError) or not conn.in_transaction:
                raise
            raise VectorError(f"sqlite-vec write failed ({type(exc).__name__}: {str(exc)[:200]})") from exc

    def _prepare(self, rows: Sequence[VectorRow]) -> list[tuple[VectorRow, np.ndarray]]:
        self._require_loaded()
        return [(row, as_vector(row.vector)) for row in rows]

    def _upsert_in(self, conn: Any, prepared: list[tuple[VectorRow, np.ndarray]]) -> int:
        """The batch in a few statements whatever its size: one read of the memories' current
        text, one point lookup per vector, then executemany per kind of change."""
        dim = self._ready_dim(conn)
        for row, vec in prepared:
            if vec.shape[0] != dim:
                raise DimensionMismatch(dim, int(vec.shape[0]), TABLE)
        current = {int(mid): (key, content) for mid, key, content in conn.execute(
            "SELECT memory_id, key, content FROM memories WHERE memory_id IN (SELECT value FROM json_each(?))",
            (json.dumps([int(row.memory_id) for row, _ in prepared]),)).fetchall()}
        # Only rows embedded from the memory's current text; of two rows of one memory the
        # later wins.
        fresh = {int(row.memory_id): (row, vec) for row, vec in prepared
                 if current.get(int(row.memory_id)) == (row.key, row.content)}
        if not fresh:
            return 0
        stored = _stored_owners(conn, list(fresh))
        in_place, replaced, new = [], [], []
        for mid, (row, vec) in fresh.items():
            owner = stored.get(mid)
            # vec0 cannot move a vector to another partition, and (0.1.9) an UPDATE loses
            # the int8 type of vec_quantize_int8(): those are deleted and inserted again.
            if owner is None:
                new.append((row, vec))
            elif owner == row.api_key_id and self.quantization != "int8":
                in_place.append((row, vec))
            else:
                replaced.append((row, vec))
        if replaced:
            conn.executemany(f"DELETE FROM {TABLE} WHERE rowid = ?", [(r.memory_id,) for r, _ in replaced])
        if in_place:
            conn.executemany(
                f"UPDATE {TABLE} SET session_id = ?, created_us = ?, expires_us = ?, embedding = ? WHERE rowid = ?",
                [(*_scope_values(r), self._param(v), r.memory_id) for r, v in in_place])
        if new or replaced:
            conn.executemany(
                f"INSERT INTO {TABLE} (rowid, api_key_id, session_id, created_us, expires_us, embedding) "
                f"VALUES (?, ?, ?, ?, ?, {self._value_sql()})",
                [(r.memory_id, r.api_key_id, *_scope_values(r), self._param(v)) for r, v in (*new, *replaced)])
        conn.execute("UPDATE memories SET needs_reindex = 0 WHERE memory_id IN (SELECT value FROM json_each(?)) "
                     "AND needs_reindex != 0", (json.dumps(list(fresh)),))
        applied = list(fresh.values())
        moved = [r.memory_id for r, _ in replaced if stored[r.memory_id] != r.api_key_id]
        self._changed(conn, lambda c: _put_rows(c, applied, dim, moved))
        return len(applied)

    def update_scope(self, memories: Sequence[Memory]) -> int:
        """Bring the filter columns (session, creation, expiry) of existing vectors up to
        date without re-embedding, e.g. after an upsert moved a memory to another session
        with the same content. The owner never changes (vec0 cannot update a partition key).
        Returns how many vectors were updated."""
        if not memories or self.db.vec_version is None:
            return 0
        updated = 0
        with self.db.write() as conn:
            if not _table_exists(conn):
                return 0
            for m in memories:
                conn.execute(f"UPDATE {TABLE} SET session_id = ?, created_us = ?, expires_us = ? WHERE rowid = ?",
                             (*_scope_values(m), m.memory_id))
                updated += conn.changes()
            if updated:
                scoped = list(memories)
                self._changed(conn, lambda c: _rescope(c, scoped))
        return updated

    def delete(self, ids: Sequence[Any]) -> DeleteResult:
        """Delete the vectors of these memories (integer memory ids, or objects with
        `.memory_id`). No table → nothing to delete."""
        keys = _memory_ids(ids)
        if not keys or self.db.vec_version is None:
            return DeleteResult(0)
        with self.db.write() as conn:
            return DeleteResult(self.delete_in_transaction(conn, keys))

    def mark_failed(self, memory_ids: Sequence[Any]) -> int:
        """Embedding failed for these memories: set `needs_reindex = 1` and remove their
        now stale vectors (a vector of the old content would match the old meaning), in one
        transaction. Returns how many memories were marked."""
        keys = _memory_ids(memory_ids)
        if not keys:
            return 0
        with self.db.write() as conn:
            return self.mark_failed_in_transaction(conn, keys)

    def mark_failed_in_transaction(self, conn: Any, memory_ids: Sequence[Any]) -> int:
        """`mark_failed` inside a write transaction the caller holds (the one that wrote
        those memories, when their vectors could not be written with them)."""
        keys = _memory_ids(memory_ids)
        if not keys:
            return 0
        conn.execute("UPDATE memories SET needs_reindex = 1 WHERE memory_id IN (SELECT value FROM json_each(?))",
                     (json.dumps(keys),))
        marked = conn.changes()
        if self.db.vec_version is not None:
            self.delete_in_transaction(conn, keys)
        self._changed(conn, lambda c: c.forget_clean())
        return marked

    def prune_orphans(self) -> int:
        """Delete vectors whose memory no longer exists (left by a failed clean-up; they are
        never returned, since searches join `memories`, but they take space and count)."""
        if self.db.vec_version is None:
            return 0
        with self.db.write() as conn:
            if not _table_exists(conn):
                return 0
            orphans = [r[0] for r in conn.execute(
                f"SELECT v.rowid FROM {TABLE} v WHERE NOT EXISTS "
                "(SELECT 1 FROM memories m WHERE m.memory_id = v.rowid)").fetchall()]
            return self.delete_in_transaction(conn, orphans)

    # -- reads ---------------------------------------------------------------------------

    def search(self, scope: SearchScope, vector: Sequence[float] | np.ndarray, k: int | None = None) -> list[VectorHit]:
        """The k nearest memories in scope, nearest first (k defaults to MEMORY_VEC_TOP_K,
        clamped to [1, 4096]). Owner = partition key; session, expiry and retention =
        metadata constraints of the same KNN. No table yet → []."""
        self._require_loaded()
        k = self.default_k if k is None else max(1, min(MAX_K, int(k)))
        vec = as_vector(vector)
        if self.cache is not None and scope.api_key_id is not None:
            hits = self._search_cached(scope, vec, k)
            if hits is not None:
                return hits
        may_block("a vector search in SQLite")
        knn = ["v.embedding MATCH " + self._value_sql(), "k = ?"]
        params: list[Any] = [self._param(vec), k]
        if scope.api_key_id is not None:
            knn.append("v.api_key_id = ?")
            params.append(scope.api_key_id)
        if scope.session_only:
            knn.append("v.session_id = ?")
            params.append(scope.session_id or _NO_SESSION)
        knn.append("v.expires_us > ?")
        params.append(unix_us(scope.now))
        if scope.created_after is not None:
            knn.append("v.created_us >= ?")
            params.append(unix_us(scope.created_after))
        recheck, recheck_params = scope_clause(scope, "m")
        sql = (f"WITH knn AS MATERIALIZED (SELECT v.rowid AS memory_id, v.distance AS distance FROM {TABLE} v "
               f"WHERE {' AND '.join(knn)}) "
               f"SELECT m.id, knn.memory_id, knn.distance FROM knn JOIN memories m ON m.memory_id = knn.memory_id "
               f"WHERE {recheck} ORDER BY knn.distance, knn.memory_id")
        with self.db.read() as conn:
            if _searchable_dim(conn, vec) is None:
                return []
            rows = conn.execute(sql, [*params, *recheck_params]).fetchall()
        return [VectorHit(memory_id=int(mid), id=str(id_), distance=float(d), score=cosine_score(float(d)))
                for id_, mid, d in rows]

    def _search_cached(self, scope: SearchScope, vec: np.ndarray, k: int) -> list[VectorHit] | None:
        """The owner's KNN on its cached matrix (loaded on first use, in this snapshot);
        None when this search must go to SQLite (old snapshot, owner too big to cache)."""
        cache = self.cache
        assert cache is not None and scope.api_key_id is not None
        owner = scope.api_key_id
        with self.db.read() as conn:
            dim = _searchable_dim(conn, vec)
            if dim is None:
                return []
            gen = read_vec_generation(conn)
            block, usable = cache.block(owner, gen)
            if not usable:
                return None
            if block is None:
                may_block("loading an owner's vectors")
                block = self._load_block(conn, owner, int(dim))
                if block is None:
                    return None
                cache.store(owner, gen, block)
            return block_hits(conn, scope, block.nearest(scope, vec, k), self.held_memories,
                              lambda ids: map(row_to_memory, rows_in_scope(conn, M_COLUMNS, ids, scope)))

    def _load_block(self, conn: Any, owner: str, dim: int) -> OwnerBlock | None:
        """Every vector of one owner, normalized, in one matrix (None: too big to cache)."""
        cache = self.cache
        assert cache is not None
        count = conn.execute("SELECT count(*) FROM memories WHERE api_key_id = ?", (owner,)).fetchone()[0]
        width = 1 if self.quantization == "int8" else 4
        if not cache.fits(int(count) * dim * 4 + int(count) * 28):
            return None
        rows = conn.execute(
            f"SELECT v.rowid, v.session_id, v.created_us, v.expires_us, v.embedding FROM memories m "
            f"JOIN {TABLE} v ON v.rowid = m.memory_id WHERE m.api_key_id = ?", (owner,)).fetchall()
        rows = [r for r in rows if r[4] is not None and len(r[4]) == dim * width]
        n = len(rows)
        matrix = np.frombuffer(b"".join(r[4] for r in rows), dtype=np.int8 if width == 1 else np.float32)
        return OwnerBlock.from_vectors(
            dim, np.fromiter((r[0] for r in rows), dtype=np.int64, count=n), matrix, [r[1] or "" for r in rows],
            np.fromiter((r[2] for r in rows), dtype=np.int64, count=n),
            np.fromiter((r[3] for r in rows), dtype=np.int64, count=n))

    def pending_for_search(self, scope: SearchScope, limit: int) -> list[Memory]:
        """`pending(owner, limit, scope=scope)` for the lazy backfill before a search, without
        scanning every row of the owner on every request: with a cache, the highest
        memory_id up to which the owner had nothing pending is remembered (valid while the
        vector generation holds), so only newer rows are checked."""
        owner = scope.api_key_id
        if self.cache is None or owner is None or self.db.vec_version is None:
            return self.pending(owner, limit, scope=scope)
        with self.db.read() as conn:
            if not _table_exists(conn):
                return self.pending(owner, limit, scope=scope)
            gen = read_vec_generation(conn)
            row = conn.execute("SELECT value FROM sequences WHERE name = 'memory_id'").fetchone()
            newest = int(row[0]) if row else 0
            clean = self.cache.clean_upto(owner, gen)
            if clean is not None and clean >= newest:
                return []
            missing = (f"(m.needs_reindex = 1 OR NOT EXISTS (SELECT 1 FROM {TABLE} v WHERE v.rowid = m.memory_id))")
            if clean is not None:
                # New rows only: the memory_id index range, owner checked per row (the "+"
                # keeps the planner off the owner index, which would read all of them).
                found = conn.execute(f"SELECT 1 FROM memories m WHERE m.memory_id > ? AND +m.api_key_id = ? "
                                     f"AND {missing} LIMIT 1", (clean, owner)).fetchone()
            else:
                found = conn.execute(f"SELECT 1 FROM memories m WHERE m.api_key_id = ? AND {missing} LIMIT 1",
                                     (owner,)).fetchone()
            if found is None:
                self.cache.set_clean(owner, gen, newest)
                return []
        return self.pending(owner, limit, scope=scope)

    def _pending_where(self, conn: Any, api_key_id: str | None, scope: SearchScope | None) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if self.db.vec_version is not None and _table_exists(conn):
            clauses.append(f"(m.needs_reindex = 1 OR NOT EXISTS (SELECT 1 FROM {TABLE} v WHERE v.rowid = m.memory_id))")
        # Without the table (or the extension) no memory has a usable vector: all pending.
        if api_key_id is not None:
            clauses.append("m.api_key_id = ?")
            params.append(api_key_id)
        if scope is not None:
            where, scope_params = scope_clause(scope, "m")
            clauses.append(where)
            params.extend(scope_params)
        return (" AND ".join(clauses) or "1"), params

    def pending(self, api_key_id: str | None = None, limit: int = 100, *, scope: SearchScope | None = None,
                before_memory_id: int | None = None) -> list[Memory]:
        """Memories that need a vector: `needs_reindex = 1`, or no vector row. Newest first
        (highest memory_id), at most `limit` (lazy backfill is bounded per request).
        `scope` narrows to what a search could return (owner, session, not expired, within
        retention), so lazy backfill never embeds rows the search would filter out;
        `before_memory_id` pages downwards (a batch loop that skips rows it failed on)."""
        limit = max(0, int(limit))
        if limit == 0:
            return []
        with self.db.read() as conn:
            where, params = self._pending_where(conn, api_key_id, scope)
            if before_memory_id is not None:
                where += " AND m.memory_id < ?"
                params.append(int(before_memory_id))
            rows = conn.execute(f"SELECT {M_COLUMNS} FROM memories m WHERE {where} "
                                "ORDER BY m.memory_id DESC LIMIT ?", [*params, limit]).fetchall()
        return [row_to_memory(r) for r in rows]

    def pending_count(self, api_key_id: str | None = None) -> int:
        with self.db.read() as conn:
            where, params = self._pending_where(conn, api_key_id, None)
            return int(conn.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone()[0])

    def count(self) -> int:
        """Vectors stored (0 before the table exists or without the extension)."""
        if self.db.vec_version is None:
            return 0
        with self.db.read() as conn:
            if not _table_exists(conn):
                return 0
            return int(conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0])

    def stored_vector(self, memory_id: int) -> bytes | None:
        """The raw stored blob of one vector (float32: 4 × dim bytes; int8: dim bytes)."""
        if self.db.vec_version is None:
            return None
        with self.db.read() as conn:
            if not _table_exists(conn):
                return None
            row = conn.execute(f"SELECT embedding FROM {TABLE} WHERE rowid = ?", (int(memory_id),)).fetchone()
        return bytes(row[0]) if row else None

    def health(self) -> dict[str, Any]:
        """Measured, never assumed: {ok, backend, vec_version, error, table_exists,
        signature, active_dim, quantization, last_reset_at, rows, pending}."""
        result: dict[str, Any] = {"ok": False, "backend": self.name, "vec_version": self.db.vec_version,
                                  "error": None, "quantization": self.quantization}
        try:
            state = self.state()
            result.update(table_exists=state.table_exists, signature=state.signature, active_dim=state.active_dim,
                          last_reset_at=iso(state.last_reset_at), rows=self.count(), pending=self.pending_count())
            if self.db.vec_version is None:
                result["error"] = f"sqlite-vec is not loaded ({self.db.vec_error or 'unknown error'})"
            elif not state.table_exists:
                result["error"] = "no vectors yet: the dimension is learned from the first embedding"
            else:
                result["ok"] = True
        except Exception as exc:  # noqa: BLE001 - a probe reports, it does not raise
            result["error"] = f"{type(exc).__name__}: {exc}"
        return result


_SIGNATURE_DIM = re.compile(r":(\d+)(?::int8)?$")


def signature_dim(signature: str | None) -> int | None:
    """The dimension encoded in a `source:model:dim[:int8]` signature, if any."""
    match = _SIGNATURE_DIM.search(signature or "")
    return int(match[1]) if match else None


_scope_values = scope_values


# -- cache changes (run by VectorCache.apply under its lock) ----------------------------------


def _put_rows(cache: VectorCache, applied: list[tuple[VectorRow, np.ndarray]], dim: int,
              moved: list[int] | None = None) -> None:
    if moved:  # vectors that changed owner leave the old owner's block
        _remove_ids(cache, moved)
    for row, vec in applied:
        block = cache.owner_block(row.api_key_id)
        if block is None or block.dim != dim:
            continue
        block.put_vector(int(row.memory_id), vec, *_scope_values(row))


def _rescope(cache: VectorCache, memories: list[Memory]) -> None:
    for m in memories:
        block = cache.owner_block(m.api_key_id)
        if block is not None:
            block.set_scope(int(m.memory_id), *_scope_values(m))


def _remove_ids(cache: VectorCache, memory_ids: list[int], forget_clean: bool = False) -> None:
    blocks = cache.each_block()
    for mid in memory_ids:
        for block in blocks:
            if mid in block.slots:
                block.remove(mid)
                break
    if forget_clean:
        cache.forget_clean()
