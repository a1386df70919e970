"""pgvector's side of the vector tier (memsvc.storage.vector_index): vectors in PostgreSQL, for
memsvc processes on many hosts that share one database.

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
from memsvc.kernel.vector_index import (
    DimensionMismatch,
    VectorError,
    VectorHit,
    VectorUnavailable,
    as_vector,
    cosine_score,
)
from memsvc.storage.database import scalar
from memsvc.storage.postgres.database import PgDatabase
from memsvc.storage.postgres.rows import M_COLUMNS, row_to_memory, rows_in_scope, scope_clause
from memsvc.storage.postgres.vector_blocks import PgVectorBlocks
from memsvc.storage.vector_cache import NO_SESSION, OwnerBlock
from memsvc.storage.vector_sql import Prepared, VecState, fresh_rows, vector_scope

TABLE = "memory_vectors"
# Owners whose "no vector missing" answer is kept (see PgVectorSql.nothing_pending); the TTL
# only bounds how long an idle owner's entry stays.
COMPLETE_OWNERS = 10_000
COMPLETE_TTL_S = 300.0
STATE = "memory_vector_state"
#: pgvector's HNSW index takes `vector` columns of at most 2,000 dimensions.
MAX_DIM = 2000
#: ensure() holds this transaction-level advisory lock while it checks and creates tables.
_ENSURE_LOCK = 0x6D656D7663  # "memvc"
_UNAVAILABLE = "pgvector is not available on this PostgreSQL server"
_RECORD = (
    f"INSERT INTO {STATE} (id, signature, dimension, generation, last_reset_at) "
    "VALUES (1, %s, %s, 1, %s) ON CONFLICT (id) DO UPDATE SET signature = excluded.signature, "
    f"dimension = excluded.dimension, generation = {STATE}.generation + 1, "
    "last_reset_at = excluded.last_reset_at"
)
_UPSERT = (
    f"INSERT INTO {TABLE} (memory_id, api_key_id, session_id, created_at, expires_at, keep, embedding) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (memory_id) DO UPDATE SET "
    "api_key_id = excluded.api_key_id, session_id = excluded.session_id, "
    "created_at = excluded.created_at, expires_at = excluded.expires_at, keep = excluded.keep, "
    "embedding = excluded.embedding"
)
_RESCOPE = (
    f"UPDATE {TABLE} v SET session_id = u.session_id, created_at = u.created_at, "
    "expires_at = u.expires_at, keep = u.keep FROM unnest(%s::bigint[], %s::text[], "
    "%s::timestamptz[], %s::timestamptz[], %s::boolean[]) AS u(memory_id, session_id, created_at, "
    "expires_at, keep) WHERE v.memory_id = u.memory_id"
)
_COMPLETE = (
    f"SELECT (SELECT count(*) FROM memories WHERE api_key_id = %s) = "
    f"(SELECT count(*) FROM {TABLE} WHERE api_key_id = %s) "
    "AND NOT EXISTS (SELECT 1 FROM memories WHERE needs_reindex AND api_key_id = %s)"
)
State = tuple[str | None, int | None, Any, bool, int]


def _vector_scope(scope: SearchScope) -> tuple[str, list[Any]]:
    """The scope on memory_vectors' filter columns (`vector_sql.vector_scope`)."""
    clauses, params = vector_scope(
        scope,
        "%s",
        lambda moment: moment,
        "(v.expires_at IS NULL OR v.expires_at > %s)",
        "(v.created_at >= %s OR v.keep)",
    )
    return " AND ".join(clauses), params


def _scope_values(item: Any) -> tuple[str, Any, Any, bool]:
    """(session_id, created_at, expires_at, keep) of a VectorRow or a Memory: the filter
    columns of its vector."""
    return (item.session_id or NO_SESSION, item.created_at, item.expires_at, bool(getattr(item, "keep", False)))


def _ef_search(k: int) -> int:
    """The HNSW candidate list for a search of k (see the module docstring)."""
    return max(40, min(1000, 2 * k))


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
    sql = (
        f"WITH approx AS MATERIALIZED (SELECT v.memory_id, v.embedding <=> %s AS distance FROM {TABLE} v "
        f"WHERE {where} ORDER BY v.embedding <=> %s LIMIT %s), "
        f"exact AS MATERIALIZED (SELECT v.memory_id, v.embedding <=> %s AS distance FROM {TABLE} v "
        f"WHERE {found} < %s AND {where}), "
        f"knn AS (SELECT memory_id, distance, false AS exact FROM approx WHERE {found} >= %s "
        "UNION ALL (SELECT memory_id, distance, true FROM exact ORDER BY distance, memory_id LIMIT %s)) "
        f"SELECT knn.memory_id, knn.distance, knn.exact, m.* FROM knn CROSS JOIN LATERAL "
        f"(SELECT {M_COLUMNS} FROM memories m WHERE m.memory_id = knn.memory_id AND {recheck} LIMIT 1) AS m "
        "ORDER BY knn.distance, knn.memory_id"
    )
    return sql, [vec, *params, vec, k, vec, k, *params, k, k, *recheck_params]


class PgVectorSql:
    """The `VectorSql` of a `PgDatabase` (see the module docstring). Float32 vectors only: a
    signature asking for int8 vectors is refused."""

    name = "pgvector"
    table = TABLE
    max_dim = MAX_DIM
    quantization = "none"
    mark = "%s"
    memory_columns = M_COLUMNS
    missing = f"(m.needs_reindex OR NOT EXISTS (SELECT 1 FROM {TABLE} v WHERE v.memory_id = m.memory_id))"
    int8_refused = "the signature asks for int8 vectors but pgvector stores float32 here"
    row_to_memory = staticmethod(row_to_memory)
    scope_clause = staticmethod(scope_clause)

    def __init__(self, database: PgDatabase, *, cache_bytes: int = 0) -> None:
        self.db = database
        #: Owners' vectors in memory (see the module docstring); None: every search in SQL.
        self.cache: PgVectorBlocks | None = PgVectorBlocks(database, cache_bytes) if cache_bytes > 0 else None
        #: Searches whose HNSW scan returned fewer than k rows and were answered exactly.
        self.exact_fallbacks = 0
        self._vector_type: TypeInfo | None = None
        self._version: str | None = None
        self._state_table = False  # once seen, never dropped: no need to look again
        self._vectors_table = False  # likewise (see has_vectors)
        self._lock = threading.Lock()
        #: owner → the change counter's value at which every memory of the owner had its
        #: vector (see nothing_pending).
        self._complete: TtlCache[int] = TtlCache(max_entries=COMPLETE_OWNERS, ttl_s=COMPLETE_TTL_S)

    # -- set-up ----------------------------------------------------------------------------

    @staticmethod
    def _extension(conn: Any) -> tuple[str | None, bool]:
        """(pgvector's version, installed in this database); version None when the server
        has no pgvector to install."""
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        if row:
            return row[0], True
        row = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
        return (row[0] if row else None), False

    def version(self, conn: Any | None = None) -> str | None:
        """pgvector's version (installed, or installable by ensure()); None without it."""
        if self._version is None:
            if conn is not None:
                self._version = self._extension(conn)[0]
            else:
                with self.db.read() as read:
                    self._version = self._extension(read)[0]
        return self._version

    @staticmethod
    def unavailable() -> str:
        return _UNAVAILABLE

    def record_unavailable(self) -> None:
        """Nothing is recorded: without pgvector there is no state table to record it in."""

    def _adapt(self, conn: Any) -> None:
        """Send and read `vector` values in binary on this connection (pgvector's psycopg
        adapter, registered once per pooled connection, from a type looked up once)."""
        if self._vector_type is None:
            info = TypeInfo.fetch(conn, "vector")
            if info is None:
                raise VectorUnavailable("the pgvector extension is not installed in this database")
            self._vector_type = info
        if conn.adapters.get_loader(self._vector_type.oid, Format.BINARY) is None:
            register_vector_info(conn, self._vector_type)

    def _has_state(self, conn: Any) -> bool:
        if not self._state_table:
            self._state_table = bool(conn.execute("SELECT to_regclass(%s) IS NOT NULL", (STATE,)).fetchone()[0])
        return self._state_table

    def _read_state(self, conn: Any) -> State:
        """(signature, dimension, last_reset_at, vectors table exists, generation) in this
        transaction, read once per read snapshot (ensure(), the backfill check and the search
        of one Retrieve all ask)."""
        memo = self.db.snapshot_memo(conn)
        if memo is not None and STATE in memo:
            cached: State = memo[STATE]
            return cached
        if not self._has_state(conn):
            return None, None, None, self.has_vectors(conn), 0
        signature, dim, reset_at, exists, generation = conn.execute(
            f"SELECT s.signature, s.dimension, s.last_reset_at, to_regclass(%s) IS NOT NULL, s.generation "
            f"FROM (SELECT 1) AS one LEFT JOIN {STATE} s ON s.id = 1",
            (TABLE,),
        ).fetchone()
        state = signature, dim, reset_at, bool(exists), int(generation or 0)
        if memo is not None:
            memo[STATE] = state
        return state

    def state(self, conn: Any) -> VecState:
        signature, dim, reset_at, exists, _ = self._read_state(conn)
        return VecState(
            signature, int(dim) if dim is not None else None, reset_at, self.version(conn) is not None, exists
        )

    def reset(self, conn: Any, signature: str, dim: int) -> bool:
        """ensure()'s write, under an advisory lock (replicas starting together create the
        tables once): re-read, else recreate the table and count one more generation."""
        self.db.on_rollback(self._forget_tables)  # what this transaction showed may not commit
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ENSURE_LOCK,))
        self._create_support(conn)
        recorded, recorded_dim, _, exists, _ = self._read_state(conn)
        if recorded == signature and recorded_dim == dim and exists:
            return False
        self._recreate(conn, dim)
        conn.execute("UPDATE memories SET needs_reindex = true WHERE NOT needs_reindex")
        conn.execute(_RECORD, (signature, dim, utcnow()))
        return True

    def _create_support(self, conn: Any) -> None:
        """The extension and the state table, if missing (under ensure()'s lock)."""
        _, installed = self._extension(conn)
        if not installed:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {STATE} (id smallint PRIMARY KEY CHECK (id = 1), "
            "signature text, dimension integer, generation bigint NOT NULL DEFAULT 0, "
            "last_reset_at timestamptz)"
        )

    @staticmethod
    def _recreate(conn: Any, dim: int) -> None:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(
            f"CREATE TABLE {TABLE} (memory_id bigint PRIMARY KEY "
            "REFERENCES memories (memory_id) ON DELETE CASCADE, api_key_id text NOT NULL, "
            "session_id text NOT NULL, created_at timestamptz NOT NULL, expires_at timestamptz, "
            f"keep boolean NOT NULL, embedding vector({int(dim)}) NOT NULL)"
        )
        conn.execute(f"CREATE INDEX {TABLE}_embedding ON {TABLE} USING hnsw (embedding vector_cosine_ops)")
        conn.execute(f"CREATE INDEX {TABLE}_owner ON {TABLE} (api_key_id, session_id)")

    def _ready_dim(self, conn: Any) -> int:
        """The active dimension; raises when ensure() was never called."""
        signature, dim, _, exists, _ = self._read_state(conn)
        if dim is None or not signature or not exists:
            raise VectorError("the vector index is not set up yet: call ensure(signature, dim) first")
        return int(dim)

    def _forget_tables(self) -> None:
        self._state_table = self._vectors_table = False

    def has_vectors(self, conn: Any) -> bool:
        """Whether `memory_vectors` exists. Once it does it is only ever replaced inside one
        transaction (ensure() drops and creates it before committing), so a True is kept."""
        if not self._vectors_table:
            self._vectors_table = bool(conn.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,)).fetchone()[0])
        return self._vectors_table

    # -- writes --------------------------------------------------------------------------

    def upsert(self, conn: Any, prepared: Prepared, rows_written_here: bool) -> int:
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
        self._adapt(conn)
        ids = sorted({int(row.memory_id) for row, _ in prepared})
        current = {
            int(mid): (key, content, flagged)
            for mid, key, content, flagged in conn.execute(
                "SELECT memory_id, key, content, needs_reindex FROM memories WHERE memory_id = ANY(%s) "
                "ORDER BY memory_id FOR SHARE",
                (ids,),
            ).fetchall()
        }
        fresh = fresh_rows(prepared, current, dim, TABLE)
        if not fresh:
            return 0
        with conn.cursor() as cur:
            cur.executemany(
                _UPSERT, [(mid, row.api_key_id, *_scope_values(row), vec) for mid, (row, vec) in fresh.items()]
            )
        flagged = [mid for mid in fresh if current[mid][2]]
        if flagged:  # an UPDATE of memories moves every replica's change counter: only when needed
            conn.execute(
                "UPDATE memories SET needs_reindex = false WHERE memory_id = ANY(%s) AND needs_reindex", (flagged,)
            )
        unlogged = [] if rows_written_here else [mid for mid in fresh if not current[mid][2]]
        if unlogged:
            conn.execute(
                "SELECT memsvc_record_owner_changes(%s, %s)", ([fresh[mid][0].api_key_id for mid in unlogged], unlogged)
            )
        return len(fresh)

    @staticmethod
    def write_failed(conn: Any) -> bool:
        """True when the connection itself was lost (which ends the caller's transaction)."""
        return bool(conn.closed or conn.broken)

    @staticmethod
    def update_scope(conn: Any, memories: Sequence[Memory]) -> int:
        """One statement over the arrays of the memories' filter columns."""
        columns = list(zip(*[(int(m.memory_id), *_scope_values(m)) for m in memories]))
        return int(conn.execute(_RESCOPE, [list(c) for c in columns]).rowcount)

    def delete(self, conn: Any, ids: list[int]) -> int:
        """The foreign key would delete them with the memories rows anyway. No table → 0."""
        if not self.has_vectors(conn):
            return 0
        return int(conn.execute(f"DELETE FROM {TABLE} WHERE memory_id = ANY(%s)", (ids,)).rowcount)

    def mark_failed(self, conn: Any, ids: list[int]) -> int:
        marked = conn.execute("UPDATE memories SET needs_reindex = true WHERE memory_id = ANY(%s)", (ids,)).rowcount
        self.delete(conn, ids)
        return int(marked)

    @staticmethod
    def prune(conn: Any) -> int:
        """The foreign key deletes a vector with its memory, so this finds none unless the
        key was dropped by hand; kept so the engine's clean-up is the same on either store."""
        return int(
            conn.execute(
                f"DELETE FROM {TABLE} v WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.memory_id = v.memory_id)"
            ).rowcount
        )

    # -- reads ---------------------------------------------------------------------------

    def search(self, scope: SearchScope, vec: np.ndarray, k: int) -> list[VectorHit]:
        """The statement's k nearest in scope (see the module docstring), each hit with its
        memory re-checked against the scope."""
        with self.db.read() as conn:
            if not self._searchable(conn, vec, k):
                return []
            self._adapt(conn)
            try:
                rows = conn.execute(*_nearest_sql(scope, vec, k)).fetchall()
            except psycopg.errors.DataException as exc:
                # This snapshot still has the old dimension while another process has
                # already replaced the table (a new signature): nothing valid to search.
                raise VectorError(
                    "the vector table changed during the search (a new embedding signature); retry"
                ) from exc
        if any(r[2] for r in rows):
            with self._lock:
                self.exact_fallbacks += 1
        hits = [(int(r[0]), max(float(r[1]), 0.0), row_to_memory(r[3:])) for r in rows]
        return [
            VectorHit(memory_id=mid, id=memory.id, distance=d, score=cosine_score(d), memory=memory)
            for mid, d, memory in hits
        ]

    def dimension(self, conn: Any) -> int | None:
        _, dim, _, exists, _ = self._read_state(conn)
        return None if dim is None or not exists else int(dim)

    def owner_block(self, conn: Any, owner: str, dim: int) -> OwnerBlock | None:
        """The owner's current block in this snapshot; None when pgvector must answer."""
        assert self.cache is not None
        return self.cache.current(conn, owner, dim, self._read_state(conn)[4])

    @staticmethod
    def memories_in_scope(conn: Any, ids: list[int], scope: SearchScope) -> Iterable[Memory]:
        return rows_in_scope(conn, ids, scope)

    def _searchable(self, conn: Any, vec: np.ndarray, k: int) -> bool:
        """Whether there is a table to search (DimensionMismatch when the query vector has
        another dimension), with this transaction's HNSW settings made for k (set_config
        with is_local, i.e. SET LOCAL: they end with the transaction), in one round trip."""
        if not self._has_state(conn):
            return False
        dim, exists, _, _ = conn.execute(
            f"SELECT s.dimension, to_regclass(%s) IS NOT NULL, set_config('hnsw.iterative_scan', 'strict_order', true), "
            f"set_config('hnsw.ef_search', %s, true) FROM (SELECT 1) AS one LEFT JOIN {STATE} s ON s.id = 1",
            (TABLE, str(_ef_search(k))),
        ).fetchone()
        if dim is None or not exists:
            return False
        if vec.shape[0] != dim:
            raise DimensionMismatch(int(dim), int(vec.shape[0]), TABLE)
        return True

    def explain_search(
        self, scope: SearchScope, vector: Sequence[float] | np.ndarray, k: int, analyze: bool = False
    ) -> str:
        """The plan of search()'s statement for this scope, with the settings search() uses
        (for operators and tests: which index answers it); `analyze` runs it."""
        vec = as_vector(vector)
        with self.db.read() as conn:
            if not self._searchable(conn, vec, k):
                return ""
            self._adapt(conn)
            sql, params = _nearest_sql(scope, vec, k)
            plan = conn.execute(("EXPLAIN ANALYZE " if analyze else "EXPLAIN ") + sql, params).fetchall()
        return "\n".join(row[0] for row in plan)

    def nothing_pending(self, owner: str) -> bool:
        """True when every memory of `owner` has a vector and none is flagged, known without
        a search of every row of the owner for one without a vector (an owner of 10,000
        memories 23 -> 3.2 ms once vacuumed; of 100, 6.2 -> 0.5 ms). With the owner's block
        in memory it is known without a statement: the block holds the owner's memories that
        wait for a vector. A vector belongs to its memory's owner and goes with its memory
        (the foreign key), so equal counts mean no memory lacks one.

        Counting both costs ≈4 ms for an owner of 10k memories, on every Retrieve; so the
        answer "none pending" is kept with the memories' change counter read in the same
        snapshot, and holds while the counter has not moved. Only a write to memories can
        make a memory lack its vector (a new memory, new content, a flag, a model change
        marking every memory), and every such write moves the counter."""
        with self.db.read() as conn:
            if not self.has_vectors(conn):
                return False
            dim = self.dimension(conn)
            if self.cache is not None and dim is not None:
                block = self.owner_block(conn, owner, dim)
                if block is not None:
                    return not block.pending
            version = scalar(conn, "SELECT version FROM memory_changes WHERE id = 1")
            if self._complete.get(owner) == version:
                return True
            complete = bool(scalar(conn, _COMPLETE, (owner, owner, owner)))
            if complete:
                self._complete.put(owner, version)
            return complete

    def stored_vector(self, conn: Any, memory_id: int) -> bytes | None:
        """One stored vector as sqlite-vec returns a float32 one: little-endian float32
        bytes, 4 × dim."""
        self._adapt(conn)
        row = conn.execute(f"SELECT embedding FROM {TABLE} WHERE memory_id = %s", (memory_id,)).fetchone()
        return np.asarray(row[0].to_numpy(), dtype="<f4").tobytes() if row else None
