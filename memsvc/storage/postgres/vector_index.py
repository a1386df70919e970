"""Vectors in PostgreSQL with pgvector: the shared-store twin of the sqlite-vec tier
(`memsvc.storage.vector_index.SqliteVecIndex`), with the same methods and the same contract,
for memsvc processes on many hosts that share one database.

Two tables, created at run time (the dimension is only known once the first embedding is
made, so no migration can declare the vector column):

    memory_vector_state  one row: signature, dimension, generation (how many times the
                         vectors table was recreated), last_reset_at
    memory_vectors       memory_id bigint PRIMARY KEY REFERENCES memories ON DELETE CASCADE,
                         the scope's filter columns (api_key_id, session_id with '' for no
                         session, created_at, expires_at, keep) and embedding vector(DIM),
                         with an HNSW index (vector_cosine_ops) and a btree on
                         (api_key_id, session_id)

Distance and score: `<=>` is pgvector's cosine distance, 1 - cos (0 = same direction, 2 =
opposite), the same quantity sqlite-vec's `distance_metric=cosine` returns for the same
vectors; the score is `1 / (1 + distance)` as there, so callers (the relevance floor turns it
back into a cosine similarity) need not know which store answered.

Scope inside the scan. A search puts the owner, session, expiry and retention filters in the
WHERE of the nearest-neighbour query itself and runs with `hnsw.iterative_scan =
strict_order`: when the index's first candidates are mostly out of scope (other owners'
vectors nearer the query), pgvector goes on walking the graph, in distance order, until it
has k rows that pass the filters, instead of returning a global top-k filtered afterwards
(which silently loses a rare owner's results). For an owner with few rows the planner takes
the btree and sorts them exactly instead, which is cheaper and exact. If the index scan still
returns fewer than k rows (its walk stopped at `hnsw.max_scan_tuples`, or part of the graph
was unreachable), the second half of the same statement, an exact scan of the rows in scope
that runs only then, answers instead, so "fewer than k" always means "fewer than k in
scope" (`exact_fallbacks` counts the searches it answered).

`hnsw.ef_search` (the candidate list of one pass) is set to twice k, at least pgvector's
default 40 and at most 1000: a pass can return no more rows than its list holds, and a list
twice the rows asked for keeps the approximate answer at the exact one (at the default k = 20
that is pgvector's 40; on 10,000 clustered 384-d vectors, recall@20 against the exact answer
was 0.99 with a list of 20 and 1.00 with 40 for an owner of half the rows, 0.997 with 40
across all owners).

Consistency across processes. Every change is one write transaction; an upsert locks the
memories it attaches vectors to (FOR SHARE) and keeps only rows embedded from their current
key and content, so a concurrent edit in another process either waits for it or makes it skip
the row, never leaves a stale vector with its flag cleared. ensure() serializes on an
advisory lock, so replicas starting together create the tables once. The foreign key deletes
a memory's vector with the memory, so no orphan can outlive its row here.

In memory first. With a cache budget (MEMORY_VEC_CACHE_MB, as for sqlite-vec) an owner's
search is answered from its vectors in memory (memsvc.storage.postgres.vector_blocks: the
sqlite-vec tier's matrix, kept current through the per-owner change log), and only the hits'
rows are read; the statement above answers cross-owner searches, owners over the budget, and
every search without a budget. Both give the same ranking (exact cosine in memory; the HNSW
walk with `ef_search` twice k, falling back to an exact scan). A vector stored or deleted
without its memory row changing records the change itself, so every replica's blocks see it.

Every method copes with the tables not existing yet: searches return nothing, counts are 0,
pending() returns every memory, deletes are no-ops.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg.vector import register_vector_info
from psycopg.pq import Format
from psycopg.types import TypeInfo

from memsvc.kernel.cache import TtlCache
from memsvc.kernel.models import Memory, SearchScope, utcnow
from memsvc.storage.database import iso
from memsvc.storage.postgres.database import PgDatabase
from memsvc.storage.postgres.rows import M_COLUMNS, row_to_memory, rows_in_scope, scope_clause
from memsvc.storage.postgres.vector_blocks import PgVectorBlocks
from memsvc.storage.vector_cache import HeldMemories, OwnerBlock, block_hits
from memsvc.storage.vector_index import DEFAULT_TOP_K, INT8_SUFFIX, MAX_K, VecState
from memsvc.kernel.vector_index import (DeleteResult, DimensionMismatch, VectorError, VectorHit, VectorRow,
                                  VectorUnavailable, as_vector, cosine_score)

TABLE = "memory_vectors"
# Owners whose "no vector missing" answer is kept (see PgVectorIndex._none_pending); the TTL
# only bounds how long an idle owner's entry stays.
COMPLETE_OWNERS = 10_000
COMPLETE_TTL_S = 300.0
STATE = "memory_vector_state"
#: pgvector's HNSW index takes `vector` columns of at most 2,000 dimensions.
MAX_DIM = 2000
#: ensure() holds this transaction-level advisory lock while it checks and creates tables.
_ENSURE_LOCK = 0x6D656D7663  # "memvc"
_NO_SESSION = ""


def _vector_scope(scope: SearchScope) -> tuple[str, list[Any]]:
    """The scope as WHERE fragments on memory_vectors (alias v): owner, session ('' = none),
    not expired, inside retention unless kept. The same rule as `rows.scope_clause` on
    memories, on the vectors' own filter columns, so the index scan itself applies it."""
    clauses = ["(v.expires_at IS NULL OR v.expires_at > %s)"]
    params: list[Any] = [scope.now]
    if scope.api_key_id is not None:
        clauses.append("v.api_key_id = %s")
        params.append(scope.api_key_id)
    if scope.session_only:
        clauses.append("v.session_id = %s")
        params.append(scope.session_id or _NO_SESSION)
    if scope.created_after is not None:
        clauses.append("(v.created_at >= %s OR v.keep)")
        params.append(scope.created_after)
    return " AND ".join(clauses), params


def _scope_values(item: Any) -> tuple[str, Any, Any, bool]:
    """(session_id, created_at, expires_at, keep) of a VectorRow or a Memory: the filter
    columns of its vector."""
    return (item.session_id or _NO_SESSION, item.created_at, item.expires_at, bool(getattr(item, "keep", False)))


def _memory_ids(items: Iterable[Any]) -> list[int]:
    """The distinct integer memory ids of ints or of objects with `.memory_id` (Memory,
    VectorRow), in order; TypeError for anything else (a public UUID is not a vector key)."""
    ids = [getattr(item, "memory_id", item) for item in items]
    wrong = next((i for i in ids if isinstance(i, bool) or not isinstance(i, (int, np.integer))), None)
    if wrong is not None:
        raise TypeError(f"pgvector keys are integer memory ids, not {type(wrong).__name__}")
    return list(dict.fromkeys(int(i) for i in ids))


def _ef_search(k: int) -> int:
    """The HNSW candidate list for a search of k (see the module docstring)."""
    return max(40, min(1000, 2 * k))


class PgVectorIndex:
    """The pgvector tier over one `PgDatabase` (see the module docstring). Float32 vectors
    only: a signature asking for int8 vectors is refused."""

    name = "pgvector"
    quantization = "none"

    def __init__(self, database: PgDatabase, *, default_k: int = DEFAULT_TOP_K, cache_bytes: int = 0,
                 held_memories: HeldMemories | None = None) -> None:
        self.db = database
        #: Where a search from memory gets its hits' rows without a statement (the memory
        #: backend's working sets); None, or an owner they do not hold: one read of the rows.
        self.held_memories = held_memories
        #: Owners' vectors in memory (see the module docstring); None: every search in SQL.
        self.cache: PgVectorBlocks | None = PgVectorBlocks(database, cache_bytes) if cache_bytes > 0 else None
        self.default_k = max(1, min(MAX_K, int(default_k)))
        #: Searches whose HNSW scan returned fewer than k rows and were answered exactly.
        self.exact_fallbacks = 0
        self._vector_type: TypeInfo | None = None
        self._version: str | None = None
        self._state_table = False  # once seen, never dropped: no need to look again
        self._vectors_table = False  # likewise (see _table_exists)
        self._lock = threading.Lock()
        #: owner → the change counter's value at which every memory of the owner had its
        #: vector (see _none_pending).
        self._complete: TtlCache[int] = TtlCache(max_entries=COMPLETE_OWNERS, ttl_s=COMPLETE_TTL_S)

    # -- set-up ----------------------------------------------------------------------------

    def _extension(self, conn: psycopg.Connection) -> tuple[str | None, bool]:
        """(pgvector's version, installed in this database); version None when the server
        has no pgvector to install."""
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        if row:
            return row[0], True
        row = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
        return (row[0] if row else None), False

    @property
    def vec_version(self) -> str | None:
        """pgvector's version (installed, or installable by ensure()); None without it."""
        if self._version is None:
            with self.db.read() as conn:
                self._version = self._extension(conn)[0]
        return self._version

    @property
    def available(self) -> bool:
        return self.vec_version is not None

    def _adapt(self, conn: psycopg.Connection) -> None:
        """Send and read `vector` values in binary on this connection (pgvector's psycopg
        adapter, registered once per pooled connection, from a type looked up once)."""
        if self._vector_type is None:
            info = TypeInfo.fetch(conn, "vector")
            if info is None:
                raise VectorUnavailable("the pgvector extension is not installed in this database")
            self._vector_type = info
        if conn.adapters.get_loader(self._vector_type.oid, Format.BINARY) is None:
            register_vector_info(conn, self._vector_type)

    def _has_state(self, conn: psycopg.Connection) -> bool:
        if not self._state_table:
            self._state_table = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (STATE,)).fetchone()[0]
        return self._state_table

    def _read_state(self, conn: psycopg.Connection) -> tuple[str | None, int | None, Any, bool, int]:
        """(signature, dimension, last_reset_at, vectors table exists, generation) in this
        transaction, read once per read snapshot (ensure(), the backfill check and the search
        of one Retrieve all ask)."""
        memo = self.db.snapshot_memo(conn)
        if memo is not None and STATE in memo:
            return memo[STATE]
        if not self._has_state(conn):
            return None, None, None, self._table_exists(conn), 0
        signature, dim, reset_at, exists, generation = conn.execute(
            f"SELECT s.signature, s.dimension, s.last_reset_at, to_regclass(%s) IS NOT NULL, s.generation "
            f"FROM (SELECT 1) AS one LEFT JOIN {STATE} s ON s.id = 1", (TABLE,)).fetchone()
        state = signature, dim, reset_at, bool(exists), int(generation or 0)
        if memo is not None:
            memo[STATE] = state
        return state

    def state(self) -> VecState:
        with self.db.read() as conn:
            signature, dim, reset_at, exists, _ = self._read_state(conn)
        return VecState(signature, int(dim) if dim is not None else None, reset_at, self.available, exists)

    def effective_signature(self, signature: str) -> str:
        """The signature as recorded (this index stores float32 vectors only)."""
        if signature.endswith(INT8_SUFFIX):
            raise VectorError("the signature asks for int8 vectors but pgvector stores float32 here")
        return signature

    def ensure(self, signature: str, dim: int) -> bool:
        """Make `memory_vectors` match `signature` and `dim`. When the recorded signature
        differs (or the table is missing), in ONE write transaction under an advisory lock:
        drop and recreate the table and its indexes, set `needs_reindex` on every memory,
        record the signature, dimension and reset time, and count one more generation.
        True when it reset; False when everything already matched (a read, no write)."""
        if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= MAX_DIM:
            raise VectorError(f"dimension must be an integer between 1 and {MAX_DIM}")
        if not signature or not isinstance(signature, str):
            raise VectorError("an embedding signature is required")
        if not self.available:
            raise VectorUnavailable("pgvector is not available on this PostgreSQL server")
        wanted = self.effective_signature(signature)
        current = self.state()
        if current.signature == wanted and current.active_dim == dim and current.table_exists:
            return False
        with self.db.write() as conn:
            self.db.on_rollback(self._forget_tables)  # what this transaction showed may not commit
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ENSURE_LOCK,))
            self._create_support(conn)
            recorded, recorded_dim, _, exists, _ = self._read_state(conn)
            if recorded == wanted and recorded_dim == dim and exists:
                return False
            self._recreate(conn, dim)
            conn.execute("UPDATE memories SET needs_reindex = true WHERE NOT needs_reindex")
            conn.execute(
                f"INSERT INTO {STATE} (id, signature, dimension, generation, last_reset_at) "
                "VALUES (1, %s, %s, 1, %s) ON CONFLICT (id) DO UPDATE SET signature = excluded.signature, "
                f"dimension = excluded.dimension, generation = {STATE}.generation + 1, "
                "last_reset_at = excluded.last_reset_at", (wanted, dim, utcnow()))
        return True

    def _create_support(self, conn: psycopg.Connection) -> None:
        """The extension and the state table, if missing (under ensure()'s lock)."""
        _, installed = self._extension(conn)
        if not installed:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {STATE} (id smallint PRIMARY KEY CHECK (id = 1), "
                     "signature text, dimension integer, generation bigint NOT NULL DEFAULT 0, "
                     "last_reset_at timestamptz)")

    @staticmethod
    def _recreate(conn: psycopg.Connection, dim: int) -> None:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(
            f"CREATE TABLE {TABLE} (memory_id bigint PRIMARY KEY "
            "REFERENCES memories (memory_id) ON DELETE CASCADE, api_key_id text NOT NULL, "
            "session_id text NOT NULL, created_at timestamptz NOT NULL, expires_at timestamptz, "
            f"keep boolean NOT NULL, embedding vector({int(dim)}) NOT NULL)")
        conn.execute(f"CREATE INDEX {TABLE}_embedding ON {TABLE} USING hnsw (embedding vector_cosine_ops)")
        conn.execute(f"CREATE INDEX {TABLE}_owner ON {TABLE} (api_key_id, session_id)")

    def _ready_dim(self, conn: psycopg.Connection) -> int:
        """The active dimension; raises when ensure() was never called."""
        signature, dim, _, exists, _ = self._read_state(conn)
        if dim is None or not signature or not exists:
            raise VectorError("the vector index is not set up yet: call ensure(signature, dim) first")
        return int(dim)

    def _forget_tables(self) -> None:
        self._state_table = self._vectors_table = False

    def _table_exists(self, conn: psycopg.Connection) -> bool:
        """Whether `memory_vectors` exists. Once it does it is only ever replaced inside one
        transaction (ensure() drops and creates it before committing), so a True is kept."""
        if not self._vectors_table:
            self._vectors_table = bool(conn.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,)).fetchone()[0])
        return self._vectors_table

    # -- vectors -------------------------------------------------------------------------

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
            return self._upsert_in(conn, prepared, rows_written_here=False)

    def upsert_in_transaction(self, conn: psycopg.Connection, rows: Sequence[VectorRow]) -> int:
        """`upsert` inside a write transaction the caller holds (the one that writes the
        memories, so a new memory and its vector commit together). All or nothing in its
        own savepoint: on failure its statements are undone, the caller's transaction goes
        on, and VectorError is raised (any other error only when the connection itself was
        lost, which ends the caller's transaction too)."""
        if not rows:
            return 0
        prepared = self._prepare(rows)
        try:
            with self.db.savepoint(conn):
                return self._upsert_in(conn, prepared, rows_written_here=True)
        except VectorError:
            raise
        except Exception as exc:
            if conn.closed or conn.broken:
                raise
            raise VectorError(f"pgvector write failed ({type(exc).__name__}: {str(exc)[:200]})") from exc

    def _prepare(self, rows: Sequence[VectorRow]) -> list[tuple[VectorRow, np.ndarray]]:
        if not self.available:
            raise VectorUnavailable("pgvector is not available on this PostgreSQL server")
        return [(row, as_vector(row.vector)) for row in rows]

    def _upsert_in(self, conn: psycopg.Connection, prepared: list[tuple[VectorRow, np.ndarray]],
                   rows_written_here: bool) -> int:
        """A few statements whatever the batch size: the memories' current text read under a
        share lock (an edit by another process waits for this transaction, or this one sees
        the edit and skips the row), then one pipelined insert-or-update per vector and one
        update of the flags that were set.

        The vector blocks in memory follow the owners' change log, which records writes of
        `memories`: clearing a flag is one. A vector stored for a memory that was not flagged
        (a memory committed earlier whose vector comes later, a re-embedding) records its
        change itself, unless `rows_written_here` (the caller's transaction wrote those memory
        rows, so the log has them already)."""
        dim = self._ready_dim(conn)
        for row, vec in prepared:
            if vec.shape[0] != dim:
                raise DimensionMismatch(dim, int(vec.shape[0]), TABLE)
        self._adapt(conn)
        ids = sorted({int(row.memory_id) for row, _ in prepared})
        current = {int(mid): (key, content, flagged) for mid, key, content, flagged in conn.execute(
            "SELECT memory_id, key, content, needs_reindex FROM memories WHERE memory_id = ANY(%s) "
            "ORDER BY memory_id FOR SHARE", (ids,)).fetchall()}
        # Only rows embedded from the memory's current text; of two rows of one memory the
        # later wins.
        fresh = {int(row.memory_id): (row, vec) for row, vec in prepared
                 if current.get(int(row.memory_id), (None, None, None))[:2] == (row.key, row.content)}
        if not fresh:
            return 0
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {TABLE} (memory_id, api_key_id, session_id, created_at, expires_at, keep, embedding) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (memory_id) DO UPDATE SET "
                "api_key_id = excluded.api_key_id, session_id = excluded.session_id, "
                "created_at = excluded.created_at, expires_at = excluded.expires_at, keep = excluded.keep, "
                "embedding = excluded.embedding",
                [(mid, row.api_key_id, *_scope_values(row), vec) for mid, (row, vec) in fresh.items()])
        flagged = [mid for mid in fresh if current[mid][2]]
        if flagged:  # an UPDATE of memories moves every replica's change counter: only when needed
            conn.execute("UPDATE memories SET needs_reindex = false WHERE memory_id = ANY(%s) AND needs_reindex",
                         (flagged,))
        unlogged = [] if rows_written_here else [mid for mid in fresh if not current[mid][2]]
        if unlogged:
            conn.execute("SELECT memsvc_record_owner_changes(%s, %s)",
                         ([fresh[mid][0].api_key_id for mid in unlogged], unlogged))
        return len(fresh)

    def update_scope(self, memories: Sequence[Memory]) -> int:
        """Bring the filter columns (session, creation, expiry, keep) of existing vectors up
        to date without re-embedding. The owner is left alone, as in the sqlite-vec tier (a
        memory never changes owner). Returns how many vectors were updated."""
        if not memories or not self.available:
            return 0
        columns = list(zip(*[(int(m.memory_id), *_scope_values(m)) for m in memories]))
        with self.db.write() as conn:
            if not self._table_exists(conn):
                return 0
            return conn.execute(
                f"UPDATE {TABLE} v SET session_id = u.session_id, created_at = u.created_at, "
                "expires_at = u.expires_at, keep = u.keep FROM unnest(%s::bigint[], %s::text[], "
                "%s::timestamptz[], %s::timestamptz[], %s::boolean[]) AS u(memory_id, session_id, created_at, "
                "expires_at, keep) WHERE v.memory_id = u.memory_id", [list(c) for c in columns]).rowcount

    def delete(self, ids: Sequence[Any]) -> DeleteResult:
        """Delete the vectors of these memories (integer memory ids, or objects with
        `.memory_id`). No table → nothing to delete."""
        keys = _memory_ids(ids)
        if not keys or not self.available:
            return DeleteResult(0)
        with self.db.write() as conn:
            return DeleteResult(self.delete_in_transaction(conn, keys))

    def delete_in_transaction(self, conn: psycopg.Connection, memory_ids: Iterable[Any]) -> int:
        """Delete vectors inside a write transaction the caller holds (together with the
        memories rows; the foreign key would delete them with the rows anyway). No table → 0."""
        ids = _memory_ids(memory_ids)
        if not ids or not self._table_exists(conn):
            return 0
        return conn.execute(f"DELETE FROM {TABLE} WHERE memory_id = ANY(%s)", (ids,)).rowcount

    def mark_failed(self, memory_ids: Sequence[Any]) -> int:
        """Embedding failed for these memories: set `needs_reindex` and remove their now
        stale vectors (a vector of the old content would match the old meaning), in one
        transaction. Returns how many memories were marked."""
        keys = _memory_ids(memory_ids)
        if not keys:
            return 0
        with self.db.write() as conn:
            return self.mark_failed_in_transaction(conn, keys)

    def mark_failed_in_transaction(self, conn: psycopg.Connection, memory_ids: Sequence[Any]) -> int:
        """`mark_failed` inside a write transaction the caller holds."""
        keys = _memory_ids(memory_ids)
        if not keys:
            return 0
        marked = conn.execute("UPDATE memories SET needs_reindex = true WHERE memory_id = ANY(%s)", (keys,)).rowcount
        self.delete_in_transaction(conn, keys)
        return marked

    def prune_orphans(self) -> int:
        """Delete vectors whose memory no longer exists. The foreign key deletes a vector
        with its memory, so this finds none unless the key was dropped by hand; kept so the
        engine's clean-up calls the same method on either store."""
        if not self.available:
            return 0
        with self.db.write() as conn:
            if not self._table_exists(conn):
                return 0
            return conn.execute(f"DELETE FROM {TABLE} v WHERE NOT EXISTS "
                                "(SELECT 1 FROM memories m WHERE m.memory_id = v.memory_id)").rowcount

    # -- reads ---------------------------------------------------------------------------

    def search(self, scope: SearchScope, vector: Sequence[float] | np.ndarray, k: int | None = None) -> list[VectorHit]:
        """The k nearest memories in scope, nearest first (ties by memory_id; k defaults to
        `default_k`, clamped to [1, 4096]). The scope is the WHERE of the index scan (see
        the module docstring); each hit carries its memory, re-checked against the scope on
        its `memories` row, so a stale filter column only costs a slot. No table yet → []."""
        if not self.available:
            raise VectorUnavailable("pgvector is not available on this PostgreSQL server")
        k = self.default_k if k is None else max(1, min(MAX_K, int(k)))
        vec = as_vector(vector)
        if self.cache is not None and scope.api_key_id is not None:
            hits = self._search_cached(scope, vec, k)
            if hits is not None:
                return hits
        with self.db.read() as conn:
            if not self._searchable(conn, vec, k):
                return []
            self._adapt(conn)
            try:
                rows = self._nearest(conn, scope, vec, k)
            except psycopg.errors.DataException as exc:
                # This snapshot still has the old dimension while another process has
                # already replaced the table (a new signature): nothing valid to search.
                raise VectorError("the vector table changed during the search (a new embedding "
                                  "signature); retry") from exc
        if any(exact for _, _, exact, _ in rows):
            with self._lock:
                self.exact_fallbacks += 1
        return [VectorHit(memory_id=int(mid), id=memory.id, distance=float(d), score=cosine_score(float(d)),
                          memory=memory) for mid, d, _, memory in rows]

    def _search_cached(self, scope: SearchScope, vec: np.ndarray, k: int) -> list[VectorHit] | None:
        """The owner's k nearest from its block in memory, with their rows (one read); None
        when pgvector must answer (see PgVectorBlocks.current)."""
        assert scope.api_key_id is not None
        with self.db.read() as conn:
            dim, block = self._owner_block(conn, scope.api_key_id)
            if dim is None:
                return []
            if vec.shape[0] != dim:
                raise DimensionMismatch(dim, int(vec.shape[0]), TABLE)
            if block is None:
                return None
            return block_hits(conn, scope, block.nearest(scope, vec, k), self.held_memories,
                              lambda ids: rows_in_scope(conn, ids, scope))

    def _owner_block(self, conn: psycopg.Connection, owner: str) -> tuple[int | None, OwnerBlock | None]:
        """(the table's dimension, the owner's current block) in this snapshot: dimension
        None when there is no table yet; block None when pgvector must answer."""
        assert self.cache is not None
        _, dim, _, exists, generation = self._read_state(conn)
        if dim is None or not exists:
            return None, None
        return int(dim), self.cache.current(conn, owner, int(dim), generation)

    def _searchable(self, conn: psycopg.Connection, vec: np.ndarray, k: int) -> bool:
        """Whether there is a table to search (DimensionMismatch when the query vector has
        another dimension), with this transaction's HNSW settings made for k (set_config
        with is_local, i.e. SET LOCAL: they end with the transaction), in one round trip."""
        if not self._has_state(conn):
            return False
        dim, exists, _, _ = conn.execute(
            f"SELECT s.dimension, to_regclass(%s) IS NOT NULL, set_config('hnsw.iterative_scan', 'strict_order', true), "
            f"set_config('hnsw.ef_search', %s, true) FROM (SELECT 1) AS one LEFT JOIN {STATE} s ON s.id = 1",
            (TABLE, str(_ef_search(k)))).fetchone()
        if dim is None or not exists:
            return False
        if vec.shape[0] != dim:
            raise DimensionMismatch(int(dim), int(vec.shape[0]), TABLE)
        return True

    @staticmethod
    def _nearest_sql(scope: SearchScope, vec: np.ndarray, k: int) -> tuple[str, list[Any]]:
        """The search statement: the k nearest in scope, with their memories.

        `approx` orders the table by the distance operator, which the planner answers from
        the HNSW index (or, for a selective owner, from the btree and a sort). Only when it
        found fewer than k rows does `exact` run (its condition on approx's count is a
        one-time filter: otherwise the scan is never started): the distances of every row
        in scope, materialized first so that no index can order them, then sorted. The
        memories rows are then looked up one by one by memory_id (a LATERAL subquery; its
        LIMIT 1, harmless on a unique key, keeps the planner from turning it back into a join
        that could scan all the owner's rows when its estimates are off)."""
        where, params = _vector_scope(scope)
        recheck, recheck_params = scope_clause(scope, "m")
        found = "(SELECT count(*) FROM approx)"
        sql = (f"WITH approx AS MATERIALIZED (SELECT v.memory_id, v.embedding <=> %s AS distance FROM {TABLE} v "
               f"WHERE {where} ORDER BY v.embedding <=> %s LIMIT %s), "
               f"exact AS MATERIALIZED (SELECT v.memory_id, v.embedding <=> %s AS distance FROM {TABLE} v "
               f"WHERE {found} < %s AND {where}), "
               f"knn AS (SELECT memory_id, distance, false AS exact FROM approx WHERE {found} >= %s "
               "UNION ALL (SELECT memory_id, distance, true FROM exact ORDER BY distance, memory_id LIMIT %s)) "
               f"SELECT knn.memory_id, knn.distance, knn.exact, m.* FROM knn CROSS JOIN LATERAL "
               f"(SELECT {M_COLUMNS} FROM memories m WHERE m.memory_id = knn.memory_id AND {recheck} LIMIT 1) AS m "
               "ORDER BY knn.distance, knn.memory_id")
        return sql, [vec, *params, vec, k, vec, k, *params, k, k, *recheck_params]

    @classmethod
    def _nearest(cls, conn: psycopg.Connection, scope: SearchScope, vec: np.ndarray,
                 k: int) -> list[tuple[int, float, bool, Memory]]:
        """(memory_id, distance, exact, memory) of the k nearest in scope, nearest first."""
        rows = conn.execute(*cls._nearest_sql(scope, vec, k)).fetchall()
        return [(int(r[0]), max(float(r[1]), 0.0), bool(r[2]), row_to_memory(r[3:])) for r in rows]

    def explain_search(self, scope: SearchScope, vector: Sequence[float] | np.ndarray, k: int,
                       analyze: bool = False) -> str:
        """The plan of search()'s statement for this scope, with the settings search() uses
        (for operators and tests: which index answers it); `analyze` runs it."""
        vec = as_vector(vector)
        with self.db.read() as conn:
            if not self._searchable(conn, vec, k):
                return ""
            self._adapt(conn)
            sql, params = self._nearest_sql(scope, vec, k)
            plan = conn.execute(("EXPLAIN ANALYZE " if analyze else "EXPLAIN ") + sql, params).fetchall()
        return "\n".join(row[0] for row in plan)

    def pending_for_search(self, scope: SearchScope, limit: int) -> list[Memory]:
        """`pending(owner, limit, scope=scope)` for the lazy backfill before a search, which
        runs before every search: when the owner has nothing pending (the usual case) that
        is known from two index counts instead of a search of every row of the owner for
        one without a vector (measured here: an owner of 10,000 memories 23 -> 3.2 ms once
        vacuumed, 14 ms before autovacuum has marked the pages all-visible; of 100, 6.2 ->
        0.5 ms). With the owner's block in memory it is known without a statement: the
        block holds the owner's memories that wait for a vector."""
        owner = scope.api_key_id
        if owner is not None and self._none_pending(owner):
            return []
        return self.pending(owner, limit, scope=scope)

    def _none_pending(self, owner: str) -> bool:
        """True when every memory of `owner` has a vector and none is flagged. A vector
        belongs to its memory's owner (a memory never changes owner) and goes with its
        memory (the foreign key), so equal counts mean no memory lacks one.

        Counting both costs ≈4 ms for an owner of 10k memories, on every Retrieve; so the
        answer "none pending" is kept with the memories' change counter read in the same
        snapshot, and holds while the counter has not moved. Only a write to memories can
        make a memory lack its vector (a new memory, new content, a flag, a model change
        marking every memory), and every such write moves the counter."""
        with self.db.read() as conn:
            if not self._table_exists(conn):
                return False
            if self.cache is not None:
                _, block = self._owner_block(conn, owner)
                if block is not None:
                    return not block.pending
            version = conn.execute("SELECT version FROM memory_changes WHERE id = 1").fetchone()[0]
            if self._complete.get(owner) == version:
                return True
            complete = bool(conn.execute(
                f"SELECT (SELECT count(*) FROM memories WHERE api_key_id = %s) = "
                f"(SELECT count(*) FROM {TABLE} WHERE api_key_id = %s) "
                "AND NOT EXISTS (SELECT 1 FROM memories WHERE needs_reindex AND api_key_id = %s)",
                (owner, owner, owner)).fetchone()[0])
            if complete:
                self._complete.put(owner, version)
            return complete

    def _pending_where(self, conn: psycopg.Connection, api_key_id: str | None,
                       scope: SearchScope | None) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        # Without the table no memory has a usable vector: all pending.
        if self._table_exists(conn):
            clauses.append(f"(m.needs_reindex OR NOT EXISTS (SELECT 1 FROM {TABLE} v "
                           "WHERE v.memory_id = m.memory_id))")
        if api_key_id is not None:
            clauses.append("m.api_key_id = %s")
            params.append(api_key_id)
        if scope is not None:
            where, scope_params = scope_clause(scope, "m")
            clauses.append(where)
            params.extend(scope_params)
        return (" AND ".join(clauses) or "true"), params

    def pending(self, api_key_id: str | None = None, limit: int = 100, *, scope: SearchScope | None = None,
                before_memory_id: int | None = None) -> list[Memory]:
        """Memories that need a vector: `needs_reindex`, or no vector row. Newest first
        (highest memory_id), at most `limit`; `scope` narrows to what a search could return,
        `before_memory_id` pages downwards (a batch loop that skips rows it failed on)."""
        limit = max(0, int(limit))
        if limit == 0:
            return []
        with self.db.read() as conn:
            where, params = self._pending_where(conn, api_key_id, scope)
            if before_memory_id is not None:
                where += " AND m.memory_id < %s"
                params.append(int(before_memory_id))
            rows = conn.execute(f"SELECT {M_COLUMNS} FROM memories m WHERE {where} "
                                "ORDER BY m.memory_id DESC LIMIT %s", [*params, limit]).fetchall()
        return [row_to_memory(r) for r in rows]

    def pending_count(self, api_key_id: str | None = None) -> int:
        with self.db.read() as conn:
            where, params = self._pending_where(conn, api_key_id, None)
            return int(conn.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone()[0])

    def count(self) -> int:
        """Vectors stored (0 before the table exists)."""
        with self.db.read() as conn:
            if not self._table_exists(conn):
                return 0
            return int(conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0])

    def stored_vector(self, memory_id: int) -> bytes | None:
        """One stored vector as sqlite-vec returns a float32 one: little-endian float32
        bytes, 4 × dim."""
        with self.db.read() as conn:
            if not self._table_exists(conn):
                return None
            self._adapt(conn)
            row = conn.execute(f"SELECT embedding FROM {TABLE} WHERE memory_id = %s", (int(memory_id),)).fetchone()
        return np.asarray(row[0].to_numpy(), dtype="<f4").tobytes() if row else None

    def health(self) -> dict[str, Any]:
        """Measured, never assumed: {ok, backend, vec_version, error, table_exists,
        signature, active_dim, quantization, last_reset_at, rows, pending}."""
        result: dict[str, Any] = {"ok": False, "backend": self.name, "vec_version": None, "error": None,
                                  "quantization": self.quantization}
        try:
            result["vec_version"] = self.vec_version
            state = self.state()
            result.update(table_exists=state.table_exists, signature=state.signature, active_dim=state.active_dim,
                          last_reset_at=iso(state.last_reset_at),
                          rows=self.count(), pending=self.pending_count())
            if result["vec_version"] is None:
                result["error"] = "pgvector is not available on this PostgreSQL server"
            elif not state.table_exists:
                result["error"] = "no vectors yet: the dimension is learned from the first embedding"
            else:
                result["ok"] = True
        except Exception as exc:  # noqa: BLE001 - a probe reports, it does not raise
            result["error"] = f"{type(exc).__name__}: {exc}"
        return result
