"""sqlite-vec's side of the vector tier (memsvc.storage.vector_index): vectors inside the
SQLite file, in a `vec0` table.

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
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from memsvc.kernel.inline import may_block
from memsvc.kernel.models import Memory, SearchScope, utcnow
from memsvc.kernel.vector_index import DimensionMismatch, VectorError, VectorHit, VectorRow, cosine_score
from memsvc.storage.database import Database, iso, parse_iso
from memsvc.storage.keyword import rows_in_scope, scope_clause
from memsvc.storage.memory_rows import M_COLUMNS, row_to_memory
from memsvc.storage.sequences import bump_vec_generation, read_vec_generation
from memsvc.storage.vector_cache import NEVER_US, OwnerBlock, VectorCache, scope_values, unix_us
from memsvc.storage.vector_sql import QUANTIZATIONS, Prepared, VecState, fresh_rows, memory_ids, vector_scope

__all__ = ["NEVER_US", "TABLE", "SqliteVecSql", "delete_in", "unix_us"]

TABLE = "vec_memories"
#: sqlite-vec's largest vector column.
MAX_DIM = 8192
DEFAULT_CHUNK_SIZE = 32
_MISSING = f"(m.needs_reindex = 1 OR NOT EXISTS (SELECT 1 FROM {TABLE} v WHERE v.rowid = m.memory_id))"
_META = "SELECT embedding_signature, active_dim, last_reset_at, vec_loaded FROM memory_vec_meta WHERE id = 1"
_RECORD = (
    "INSERT INTO memory_vec_meta (id, active_dim, embedding_signature, last_reset_at, vec_loaded) "
    "VALUES (1, ?, ?, ?, 1) ON CONFLICT(id) DO UPDATE SET active_dim = excluded.active_dim, "
    "embedding_signature = excluded.embedding_signature, last_reset_at = excluded.last_reset_at, "
    "vec_loaded = 1"
)
_IDS = "(SELECT value FROM json_each(?))"
CacheChange = Callable[[VectorCache], None]


def _table_exists(conn: Any) -> bool:
    return (
        conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)).fetchone() is not None
    )


def _stored_owners(conn: Any, ids: Sequence[int]) -> dict[int, str]:
    """{memory_id: owner (partition key)} of the ids that have a vector. One point lookup
    per id: vec0 answers `rowid = ?` from its rowid index, but `rowid IN (...)` scans the
    whole table (milliseconds per 20,000 vectors, for every call)."""
    if not ids:
        return {}
    rows = conn.executemany(
        f"SELECT rowid, api_key_id FROM {TABLE} WHERE rowid = ?", [(mid,) for mid in ids]
    ).fetchall()
    return {int(mid): owner for mid, owner in rows}


def delete_in(conn: Any, ids: Iterable[Any]) -> int:
    """Delete vectors inside a write transaction the caller already holds (e.g. together
    with the `memories` rows, so a crash leaves neither half). No table → 0."""
    keys = memory_ids(ids)
    if not keys or not _table_exists(conn):
        return 0
    found = _stored_owners(conn, keys)
    if found:
        conn.executemany(f"DELETE FROM {TABLE} WHERE rowid = ?", [(mid,) for mid in found])
        bump_vec_generation(conn)
    return len(found)


class SqliteVecSql:
    """The `VectorSql` of a SQLite `Database` (see the module docstring). `quantization`:
    "none" (float32) or "int8"; `chunk_size`: vec0's chunk size, a multiple of 8."""

    name = "sqlite-vec"
    table = TABLE
    max_dim = MAX_DIM
    mark = "?"
    memory_columns = M_COLUMNS
    missing = _MISSING
    int8_refused = (
        "the signature asks for int8 vectors but this index stores float32 (set MEMORY_VEC_QUANTIZATION=int8)"
    )
    row_to_memory = staticmethod(row_to_memory)
    scope_clause = staticmethod(scope_clause)

    def __init__(self, db: Database, *, quantization: str, chunk_size: int, cache_bytes: int) -> None:
        if quantization not in QUANTIZATIONS:
            raise ValueError(f"quantization must be one of {', '.join(QUANTIZATIONS)}, not {quantization!r}")
        if chunk_size < 8 or chunk_size % 8:
            raise ValueError("chunk_size must be a positive multiple of 8")
        self.db = db
        self.quantization = quantization
        self.chunk_size = int(chunk_size)
        #: Per-owner in-memory matrices (memsvc.storage.vector_cache); None = search in SQLite.
        self.cache: VectorCache | None = VectorCache(cache_bytes) if cache_bytes > 0 else None

    # -- state and set-up --------------------------------------------------------------------

    def version(self) -> str | None:
        return self.db.vec_version

    def unavailable(self) -> str:
        return f"sqlite-vec is not loaded ({self.db.vec_error or 'unknown error'})"

    def record_unavailable(self) -> None:
        """Keep `vec_loaded` truthful when the extension failed to load (only writes on a
        change)."""
        with self.db.read() as conn:
            row = conn.execute("SELECT vec_loaded FROM memory_vec_meta WHERE id = 1").fetchone()
        if row and row[0]:
            with self.db.write() as conn:
                conn.execute("UPDATE memory_vec_meta SET vec_loaded = 0 WHERE id = 1")

    def state(self, conn: Any) -> VecState:
        row = conn.execute(_META).fetchone()
        signature, dim, reset_at, loaded = row if row else (None, None, None, 0)
        return VecState(
            signature, int(dim) if dim is not None else None, parse_iso(reset_at), bool(loaded), _table_exists(conn)
        )

    def has_vectors(self, conn: Any) -> bool:
        return self.db.vec_version is not None and _table_exists(conn)

    def _create_sql(self, dim: int) -> str:
        column = f"int8[{dim}]" if self.quantization == "int8" else f"float[{dim}]"
        return (
            f"CREATE VIRTUAL TABLE {TABLE} USING vec0(chunk_size={self.chunk_size}, "
            "api_key_id text partition key, session_id text, created_us integer, expires_us integer, "
            f"embedding {column} distance_metric=cosine)"
        )

    def reset(self, conn: Any, signature: str, dim: int) -> bool:
        """ensure()'s write: re-read under the write lock (another writer may have done it
        meanwhile), else recreate the table and mark every memory."""
        row = conn.execute(
            "SELECT embedding_signature, active_dim, vec_loaded FROM memory_vec_meta WHERE id = 1"
        ).fetchone()
        if row and row[0] == signature and row[1] == dim and _table_exists(conn):
            if not row[2]:
                conn.execute("UPDATE memory_vec_meta SET vec_loaded = 1 WHERE id = 1")
            return False
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(self._create_sql(dim))
        conn.execute("UPDATE memories SET needs_reindex = 1 WHERE needs_reindex = 0")
        self._changed(conn)
        conn.execute(_RECORD, (dim, signature, iso(utcnow())))
        return True

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

    # -- cache coherence -------------------------------------------------------------------

    def _changed(self, conn: Any, change: CacheChange | None = None) -> None:
        """Inside a write transaction that changed vectors: bump the generation and apply
        `change(cache)` to this process's cache (None = drop the whole cache)."""
        gen = bump_vec_generation(conn)
        cache = self.cache
        if cache is None:
            return
        cache.apply(gen, change if change is not None else (lambda c: c._reset(gen)))
        self.db.on_rollback(cache.invalidate)

    def write_failed(self, conn: Any) -> bool:
        """After a failed upsert in a savepoint: drop this process's cache (its changes may
        not have happened); True when SQLite rolled back the caller's whole transaction."""
        if self.cache is not None:
            self.cache.invalidate()
        return not conn.in_transaction

    # -- writes --------------------------------------------------------------------------

    def _param(self, vector: np.ndarray) -> bytes:
        if self.quantization == "int8":
            # Scale so the largest component is ±1: cosine ignores scale, int8 resolution is
            # then used in full (see the module docstring).
            vector = vector / np.float32(np.abs(vector).max())
        return np.ascontiguousarray(vector, dtype=np.float32).tobytes()

    def _value_sql(self) -> str:
        return "vec_quantize_int8(?, 'unit')" if self.quantization == "int8" else "?"

    def upsert(self, conn: Any, prepared: Prepared, rows_written_here: bool) -> int:
        """The batch in a few statements whatever its size: one read of the memories' current
        text, one point lookup per vector, then executemany per kind of change."""
        dim = self._ready_dim(conn)
        current = {
            int(mid): (key, content)
            for mid, key, content in conn.execute(
                f"SELECT memory_id, key, content FROM memories WHERE memory_id IN {_IDS}",
                (json.dumps([int(row.memory_id) for row, _ in prepared]),),
            ).fetchall()
        }
        fresh = fresh_rows(prepared, current, dim, TABLE)
        if not fresh:
            return 0
        stored = _stored_owners(conn, list(fresh))
        in_place, replaced, new = self._classify(fresh, stored)
        if replaced:
            conn.executemany(f"DELETE FROM {TABLE} WHERE rowid = ?", [(r.memory_id,) for r, _ in replaced])
        if in_place:
            conn.executemany(
                f"UPDATE {TABLE} SET session_id = ?, created_us = ?, expires_us = ?, embedding = ? WHERE rowid = ?",
                [(*scope_values(r), self._param(v), r.memory_id) for r, v in in_place],
            )
        if new or replaced:
            conn.executemany(
                f"INSERT INTO {TABLE} (rowid, api_key_id, session_id, created_us, expires_us, embedding) "
                f"VALUES (?, ?, ?, ?, ?, {self._value_sql()})",
                [(r.memory_id, r.api_key_id, *scope_values(r), self._param(v)) for r, v in (*new, *replaced)],
            )
        conn.execute(
            f"UPDATE memories SET needs_reindex = 0 WHERE memory_id IN {_IDS} AND needs_reindex != 0",
            (json.dumps(list(fresh)),),
        )
        applied = list(fresh.values())
        moved = [r.memory_id for r, _ in replaced if stored[r.memory_id] != r.api_key_id]
        self._changed(conn, lambda c: _put_rows(c, applied, dim, moved))
        return len(applied)

    def _classify(
        self, fresh: dict[int, tuple[VectorRow, np.ndarray]], stored: dict[int, str]
    ) -> tuple[Prepared, Prepared, Prepared]:
        """(updated in place, deleted and inserted again, new). vec0 cannot move a vector to
        another partition, and (0.1.9) an UPDATE loses the int8 type of vec_quantize_int8()."""
        in_place: Prepared = []
        replaced: Prepared = []
        new: Prepared = []
        for mid, (row, vec) in fresh.items():
            owner = stored.get(mid)
            if owner is None:
                new.append((row, vec))
            elif owner == row.api_key_id and self.quantization != "int8":
                in_place.append((row, vec))
            else:
                replaced.append((row, vec))
        return in_place, replaced, new

    def update_scope(self, conn: Any, memories: Sequence[Memory]) -> int:
        """One point update per vector (vec0 cannot update a partition key: the owner stays)."""
        updated = 0
        for m in memories:
            conn.execute(
                f"UPDATE {TABLE} SET session_id = ?, created_us = ?, expires_us = ? WHERE rowid = ?",
                (*scope_values(m), m.memory_id),
            )
            updated += conn.changes()
        if updated:
            scoped = list(memories)
            self._changed(conn, lambda c: _rescope(c, scoped))
        return updated

    def delete(self, conn: Any, ids: list[int]) -> int:
        """`delete_in`, keeping this process's cache in step."""
        deleted = delete_in(conn, ids)
        if deleted and self.cache is not None:
            gen = read_vec_generation(conn)
            self.cache.apply(gen, lambda c: _remove_ids(c, ids))
            self.db.on_rollback(self.cache.invalidate)
        return deleted

    def mark_failed(self, conn: Any, ids: list[int]) -> int:
        conn.execute(f"UPDATE memories SET needs_reindex = 1 WHERE memory_id IN {_IDS}", (json.dumps(ids),))
        marked = conn.changes()
        if self.db.vec_version is not None:
            self.delete(conn, ids)
        self._changed(conn, lambda c: c.forget_clean())
        return int(marked)

    def prune(self, conn: Any) -> int:
        orphans = [
            r[0]
            for r in conn.execute(
                f"SELECT v.rowid FROM {TABLE} v WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.memory_id = v.rowid)"
            ).fetchall()
        ]
        return self.delete(conn, orphans)

    # -- reads ---------------------------------------------------------------------------

    def dimension(self, conn: Any) -> int | None:
        """The table's dimension when a search can run (None: no table or no dimension yet)."""
        row = conn.execute("SELECT active_dim FROM memory_vec_meta WHERE id = 1").fetchone()
        dim = row[0] if row else None
        return None if dim is None or not _table_exists(conn) else int(dim)

    def _knn(self, scope: SearchScope, vec: np.ndarray, k: int) -> tuple[str, list[Any]]:
        """The KNN: owner = partition key; session, expiry and retention = metadata
        constraints of the same scan; then the scope re-checked on the memories rows."""
        constraints, constraint_params = vector_scope(scope, "?", unix_us, "v.expires_us > ?", "v.created_us >= ?")
        knn = ["v.embedding MATCH " + self._value_sql(), "k = ?", *constraints]
        params: list[Any] = [self._param(vec), k, *constraint_params]
        recheck, recheck_params = scope_clause(scope, "m")
        sql = (
            f"WITH knn AS MATERIALIZED (SELECT v.rowid AS memory_id, v.distance AS distance FROM {TABLE} v "
            f"WHERE {' AND '.join(knn)}) "
            f"SELECT m.id, knn.memory_id, knn.distance FROM knn JOIN memories m ON m.memory_id = knn.memory_id "
            f"WHERE {recheck} ORDER BY knn.distance, knn.memory_id"
        )
        return sql, [*params, *recheck_params]

    def search(self, scope: SearchScope, vec: np.ndarray, k: int) -> list[VectorHit]:
        may_block("a vector search in SQLite")
        sql, params = self._knn(scope, vec, k)
        with self.db.read() as conn:
            dim = self.dimension(conn)
            if dim is None:
                return []
            if vec.shape[0] != dim:
                raise DimensionMismatch(dim, int(vec.shape[0]), TABLE)
            rows: list[Any] = conn.execute(sql, params).fetchall()
        return [
            VectorHit(memory_id=int(mid), id=str(id_), distance=float(d), score=cosine_score(float(d)))
            for id_, mid, d in rows
        ]

    def owner_block(self, conn: Any, owner: str, dim: int) -> OwnerBlock | None:
        """The owner's cached matrix (loaded on first use, in this snapshot); None when this
        search must go to SQLite (old snapshot, owner too big to cache)."""
        cache = self.cache
        assert cache is not None
        gen = read_vec_generation(conn)
        block, usable = cache.block(owner, gen)
        if not usable:
            return None
        if block is None:
            may_block("loading an owner's vectors")
            block = self._load_block(conn, owner, dim)
            if block is None:
                return None
            cache.store(owner, gen, block)
        return block

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
            f"JOIN {TABLE} v ON v.rowid = m.memory_id WHERE m.api_key_id = ?",
            (owner,),
        ).fetchall()
        rows = [r for r in rows if r[4] is not None and len(r[4]) == dim * width]
        n = len(rows)
        matrix = np.frombuffer(b"".join(r[4] for r in rows), dtype=np.int8 if width == 1 else np.float32)
        return OwnerBlock.from_vectors(
            dim,
            np.fromiter((r[0] for r in rows), dtype=np.int64, count=n),
            matrix,
            [r[1] or "" for r in rows],
            np.fromiter((r[2] for r in rows), dtype=np.int64, count=n),
            np.fromiter((r[3] for r in rows), dtype=np.int64, count=n),
        )

    def memories_in_scope(self, conn: Any, ids: list[int], scope: SearchScope) -> Iterable[Memory]:
        return map(row_to_memory, rows_in_scope(conn, M_COLUMNS, ids, scope))

    def nothing_pending(self, owner: str) -> bool:
        """With a cache, the highest memory_id up to which the owner had nothing pending is
        remembered (valid while the vector generation holds), so only newer rows are checked."""
        if self.cache is None:
            return False
        with self.db.read() as conn:
            if not _table_exists(conn):
                return False
            gen = read_vec_generation(conn)
            row = conn.execute("SELECT value FROM sequences WHERE name = 'memory_id'").fetchone()
            newest = int(row[0]) if row else 0
            clean = self.cache.clean_upto(owner, gen)
            if clean is not None and clean >= newest:
                return True
            if clean is not None:
                # New rows only: the memory_id index range, owner checked per row (the "+"
                # keeps the planner off the owner index, which would read all of them).
                found = conn.execute(
                    f"SELECT 1 FROM memories m WHERE m.memory_id > ? AND +m.api_key_id = ? AND {_MISSING} LIMIT 1",
                    (clean, owner),
                ).fetchone()
            else:
                found = conn.execute(
                    f"SELECT 1 FROM memories m WHERE m.api_key_id = ? AND {_MISSING} LIMIT 1", (owner,)
                ).fetchone()
            if found is None:
                self.cache.set_clean(owner, gen, newest)
            return found is None

    def stored_vector(self, conn: Any, memory_id: int) -> bytes | None:
        row = conn.execute(f"SELECT embedding FROM {TABLE} WHERE rowid = ?", (memory_id,)).fetchone()
        return bytes(row[0]) if row else None


# -- cache changes (run by VectorCache.apply under its lock) ----------------------------------


def _put_rows(cache: VectorCache, applied: Prepared, dim: int, moved: list[int] | None = None) -> None:
    if moved:  # vectors that changed owner leave the old owner's block
        _remove_ids(cache, moved)
    for row, vec in applied:
        block = cache.owner_block(row.api_key_id)
        if block is None or block.dim != dim:
            continue
        block.put_vector(int(row.memory_id), vec, *scope_values(row))


def _rescope(cache: VectorCache, memories: list[Memory]) -> None:
    for m in memories:
        block = cache.owner_block(m.api_key_id)
        if block is not None:
            block.set_scope(int(m.memory_id), *scope_values(m))


def _remove_ids(cache: VectorCache, ids: list[int]) -> None:
    blocks = cache.each_block()
    for mid in ids:
        for block in blocks:
            if mid in block.slots:
                block.remove(mid)
                break
