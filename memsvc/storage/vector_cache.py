"""Per-owner in-memory vector matrices, kept coherent with writes: one piece that both
stores' vector tiers feed (memsvc.storage.vector_index: sqlite-vec in memsvc.storage.sqlite_vec,
pgvector in memsvc.storage.postgres.pgvector).

Why: a KNN over one owner's vectors in vec0 reads them chunk by chunk through SQLite and
computes distances one vector at a time (bench/knn_bench.py: about 6× the time of a NumPy
scan over the same vectors); pgvector's HNSW walk for one owner among many costs about 3 ms a
search (bench/replicas_bench.py). Here each searched owner's vectors live in one contiguous,
L2-normalized float32 matrix (`OwnerBlock`), and a search is one matrix-vector product over
that owner's rows only (other owners' data costs nothing), with the scope filters (session,
expiry, retention) as vector masks — exact cosine, so recall@k is 1.0 against the exact answer.

`OwnerBlocks` holds the blocks, LRU by bytes under a budget (an owner larger than the budget
is never held and is searched by the store's own index). The store stays the source of
truth; how a block is known to be current is the store's:

- SQLite (`VectorCache`): every transaction that changes vectors bumps the `vec_generation`
  row of `sequences` (in the same transaction), and the cache remembers the generation it
  reflects (`known_gen`). This process's own vector writes apply their change to the cache
  inside the write transaction and move `known_gen` one step (a rollback drops the whole
  cache); a search reads the generation in its snapshot: equal → the cache is current;
  greater → another process changed vectors, so the cache is dropped and rebuilt lazily;
  smaller → the snapshot is older than the cache, so that one search reads SQLite directly.
  It also remembers, per owner, the highest memory_id up to which the owner is known to have
  no memory waiting for a vector (`clean_upto`), so the lazy backfill need not scan every
  row of a large owner on every request.
- PostgreSQL: each block carries the owner's change number it reflects (`version`, from the
  per-owner change log of migrations/postgres/0002, the one the keyword working sets follow)
  and the memories of the owner that have no vector yet (`pending`); a search reads the
  owner's number in its snapshot and applies the changed rows (`apply_changes`), so a write
  through another replica is in the next search.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from memsvc.kernel.models import Memory, SearchScope
from memsvc.kernel.vector_index import VectorHit, best_first, cosine_score, normalized

#: Reads the memories of some ids that a scope may see from memory, without a statement (the
#: owner's working set, memsvc.working_set): (conn, scope, memory ids) -> memories in no
#: order, or None where the store must read them.
HeldMemories = Callable[[Any, SearchScope, list[int]], "list[Memory] | None"]

_DEAD_EXPIRY = np.iinfo(np.int64).min
#: "never expires" (and a kept memory's creation, which no retention cut-off reaches):
#: 9999-12-31T23:59:59.999999Z in unix microseconds.
NEVER_US = 253_402_300_799_999_999
NO_SESSION = ""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
#: Owners share this many locks by hash for refreshing their blocks (as the working sets do).
LOCK_STRIPES = 64


def unix_us(dt: datetime) -> int:
    """Exact unix microseconds (a naive datetime is taken as UTC, like `iso`)."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return (dt - _EPOCH) // _US


def scope_columns(
    session_id: str | None, created_at: datetime, expires_at: datetime | None, keep: bool
) -> tuple[str, int, int]:
    """(session_id, created_us, expires_us): the filter columns of a vector. created_us is
    what the retention filter compares (`created_us >= cutoff`): a kept memory's is NEVER_US,
    so no age hides it."""
    return (
        session_id or NO_SESSION,
        NEVER_US if keep else unix_us(created_at),
        unix_us(expires_at) if expires_at is not None else NEVER_US,
    )


def scope_values(item: Any) -> tuple[str, int, int]:
    """`scope_columns` of a VectorRow or a Memory."""
    return scope_columns(item.session_id, item.created_at, item.expires_at, bool(getattr(item, "keep", False)))


def block_hits(
    conn: Any,
    scope: SearchScope,
    founds: Sequence[Sequence[tuple[int, float]]],
    held: HeldMemories | None,
    read_rows: Callable[[list[int]], Iterable[Memory]],
) -> list[list[VectorHit]]:
    """Block searches' (memory_id, distance) lists as hits with their memories, nearest
    first: from `held` (the working set the same Retrieve's keyword search keeps current)
    when it answers, else by `read_rows` (one statement in the caller's snapshot, for all
    the lists at once). Memories the scope may not see (expired, deleted, out of the
    session) are left out either way."""
    ids = list(dict.fromkeys(memory_id for found in founds for memory_id, _ in found))
    if not ids:
        return [[] for _ in founds]
    memories = held(conn, scope, ids) if held is not None else None
    live = {m.memory_id: m for m in (memories if memories is not None else read_rows(ids))}
    return [
        [
            VectorHit(memory_id=mid, id=live[mid].id, distance=d, score=cosine_score(d), memory=live[mid])
            for mid, d in found
            if mid in live
        ]
        for found in founds
    ]


@dataclass(frozen=True)
class VectorChange:
    """One memory of an owner as it now is: its vector as stored (None: it has none), whether
    it waits for one (no vector, or flagged for re-embedding), and its filter columns."""

    memory_id: int
    vector: np.ndarray | None
    pending: bool
    scope: tuple[str, int, int]


class OwnerBlock:
    """One owner's vectors: a growable matrix plus filter columns, with slot reuse."""

    def __init__(self, dim: int, capacity: int = 64):
        capacity = max(16, int(capacity))
        self.dim = dim
        self.matrix = np.zeros((capacity, dim), dtype=np.float32)
        self.ids = np.full(capacity, -1, dtype=np.int64)
        self.created = np.zeros(capacity, dtype=np.int64)
        self.expires = np.full(capacity, _DEAD_EXPIRY, dtype=np.int64)
        self.session = np.zeros(capacity, dtype=np.int32)
        self.session_codes: dict[str, int] = {"": 0}
        self.slots: dict[int, int] = {}
        self.used = 0
        self.dead = 0
        self.lock = threading.Lock()
        #: The owner's change number this block reflects (stores with a per-owner change log).
        self.version = 0
        #: The owner's memories that have no vector to search (stores that keep the block
        #: from memory rows: their lazy backfill is due exactly when this is not empty).
        self.pending: set[int] = set()

    @classmethod
    def from_arrays(
        cls,
        dim: int,
        ids: np.ndarray,
        matrix: np.ndarray,
        sessions: list[str],
        created: np.ndarray,
        expires: np.ndarray,
    ) -> OwnerBlock:
        n = len(ids)
        block = cls(dim, capacity=max(16, n + n // 8))
        block.matrix[:n] = matrix
        block.ids[:n] = ids
        block.created[:n] = created
        block.expires[:n] = expires
        block.session[:n] = [block._code(s) for s in sessions]
        block.slots = {int(mid): i for i, mid in enumerate(ids)}
        block.used = n
        return block

    @classmethod
    def from_vectors(
        cls,
        dim: int,
        ids: np.ndarray,
        vectors: np.ndarray,
        sessions: list[str],
        created: np.ndarray,
        expires: np.ndarray,
    ) -> OwnerBlock:
        """A block of vectors as stored (float32 or int8, any length): each row normalized."""
        if len(ids) == 0:
            return cls(dim)
        return cls.from_arrays(dim, ids, normalized(vectors.reshape(len(ids), dim)), sessions, created, expires)

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.ids.nbytes * 3 + self.session.nbytes)

    def __len__(self) -> int:
        return len(self.slots)

    def _code(self, session: str) -> int:
        code = self.session_codes.get(session)
        if code is None:
            code = len(self.session_codes)
            self.session_codes[session] = code
        return code

    def _grow(self) -> None:
        capacity = self.matrix.shape[0] * 2
        for name in ("matrix", "ids", "created", "expires", "session"):
            old = getattr(self, name)
            shape = (capacity, self.dim) if name == "matrix" else (capacity,)
            fill = -1 if name == "ids" else (_DEAD_EXPIRY if name == "expires" else 0)
            new = np.full(shape, fill, dtype=old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)

    def put(self, memory_id: int, vector: np.ndarray, session: str, created_us: int, expires_us: int) -> None:
        with self.lock:
            slot = self.slots.get(memory_id)
            if slot is None:
                if self.used == self.matrix.shape[0]:
                    self._grow()
                slot = self.used
                self.used += 1
                self.slots[memory_id] = slot
            self.matrix[slot] = vector
            self.ids[slot] = memory_id
            self.created[slot] = created_us
            self.expires[slot] = expires_us
            self.session[slot] = self._code(session)

    def put_vector(self, memory_id: int, vector: np.ndarray, session: str, created_us: int, expires_us: int) -> None:
        """`put` of a vector as stored (normalized here)."""
        self.put(memory_id, normalized(vector), session, created_us, expires_us)

    def apply_changes(self, removed: Iterable[int], changed: Sequence[VectorChange], version: int) -> None:
        """Bring the block to `version`: drop the `removed` memories and take each of
        `changed` as its memory now is."""
        for memory_id in removed:
            self.remove(memory_id)
            self.pending.discard(memory_id)
        for change in changed:
            if change.vector is None:
                self.remove(change.memory_id)
            else:
                self.put_vector(change.memory_id, change.vector, *change.scope)
            if change.pending:
                self.pending.add(change.memory_id)
            else:
                self.pending.discard(change.memory_id)
        self.version = version

    def set_scope(self, memory_id: int, session: str, created_us: int, expires_us: int) -> None:
        with self.lock:
            slot = self.slots.get(memory_id)
            if slot is not None:
                self.created[slot] = created_us
                self.expires[slot] = expires_us
                self.session[slot] = self._code(session)

    def remove(self, memory_id: int) -> None:
        with self.lock:
            slot = self.slots.pop(memory_id, None)
            if slot is None:
                return
            self.ids[slot] = -1
            self.expires[slot] = _DEAD_EXPIRY  # never passes the expiry mask
            self.dead += 1
            if self.dead > 64 and self.dead * 2 > self.used:
                self._compact()

    def _compact(self) -> None:
        live = np.flatnonzero(self.ids[: self.used] >= 0)
        n = len(live)
        for name in ("matrix", "ids", "created", "expires", "session"):
            arr = getattr(self, name)
            arr[:n] = arr[live]
            arr[n : self.used] = -1 if name == "ids" else (_DEAD_EXPIRY if name == "expires" else 0)
        self.slots = {int(mid): i for i, mid in enumerate(self.ids[:n])}
        self.used, self.dead = n, 0

    def nearest(self, scope: SearchScope, vectors: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        """`search` for a retrieval scope and query vectors as given (rows, normalized here)."""
        return self.search(
            normalized(np.atleast_2d(vectors)),
            k,
            unix_us(scope.now),
            unix_us(scope.created_after) if scope.created_after is not None else None,
            (scope.session_id or NO_SESSION) if scope.session_only else None,
        )

    def search(
        self, queries: np.ndarray, k: int, now_us: int, created_after_us: int | None, session: str | None
    ) -> list[list[tuple[int, float]]]:
        """For each query row, the k nearest live vectors in scope as (memory_id, cosine
        distance), nearest first (ties by memory_id). The rows must be L2-normalized; several
        share the scope's mask and one matrix product."""
        with self.lock:
            n = self.used
            if n == 0:
                return [[] for _ in queries]
            sims = self.matrix[:n] @ queries.T
            mask = self.expires[:n] > now_us
            if created_after_us is not None:
                mask &= self.created[:n] >= created_after_us
            if session is not None:
                code = self.session_codes.get(session)
                if code is None:
                    return [[] for _ in queries]
                mask &= self.session[:n] == code
            found = np.flatnonzero(mask)
            if found.size == 0:
                return [[] for _ in queries]
            if found.size < n:
                sims = sims[found]
            mids = self.ids[found].copy()
        return [_top(sims[:, column], mids, k) for column in range(sims.shape[1])]


def _top(sims: np.ndarray, mids: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k highest similarities as (memory_id, cosine distance), nearest first, ties by id."""
    return [(int(mids[i]), max(1.0 - float(sims[i]), 0.0)) for i in best_first(sims, mids, k)]


class OwnerBlocks:
    """The owners' blocks, least recently used dropped first while their bytes are over
    `max_bytes`. Thread-safe; `lock_for(owner)` serializes whoever refreshes one owner."""

    def __init__(self, max_bytes: int):
        self.max_bytes = int(max_bytes)
        self._lock = threading.Lock()
        self._blocks: OrderedDict[str, OwnerBlock] = OrderedDict()
        self._bytes = 0
        self._stripes = [threading.Lock() for _ in range(LOCK_STRIPES)]
        self.hits = 0
        self.misses = 0
        self.resets = 0
        self.evictions = 0

    def lock_for(self, owner: str) -> threading.Lock:
        return self._stripes[hash(owner) % LOCK_STRIPES]

    def fits(self, nbytes: int) -> bool:
        return nbytes <= self.max_bytes

    def get(self, owner: str) -> OwnerBlock | None:
        """The owner's block (now the most recently used), or None."""
        with self._lock:
            return self._get(owner)

    def _get(self, owner: str) -> OwnerBlock | None:
        block = self._blocks.get(owner)
        if block is not None:
            self._blocks.move_to_end(owner)
            self.hits += 1
        else:
            self.misses += 1
        return block

    def keep(self, owner: str, block: OwnerBlock) -> bool:
        """Hold `block` as the owner's (replacing any), unless it alone is over the budget."""
        with self._lock:
            return self._keep(owner, block)

    def _keep(self, owner: str, block: OwnerBlock) -> bool:
        if block.nbytes > self.max_bytes:
            self._drop(owner)
            return False
        self._drop(owner)
        self._blocks[owner] = block
        self._bytes += block.nbytes
        self._fit()
        return owner in self._blocks

    def refit(self) -> None:
        """After blocks grew in place: count their bytes again and drop the least recently
        used while over the budget."""
        with self._lock:
            self._bytes = sum(b.nbytes for b in self._blocks.values())
            self._fit()

    def _fit(self) -> None:
        while self._bytes > self.max_bytes and self._blocks:
            _, evicted = self._blocks.popitem(last=False)
            self._bytes -= evicted.nbytes
            self.evictions += 1

    def drop(self, owner: str) -> None:
        with self._lock:
            self._drop(owner)

    def _drop(self, owner: str) -> None:
        old = self._blocks.pop(owner, None)
        if old is not None:
            self._bytes -= old.nbytes

    def clear(self) -> None:
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        self._blocks.clear()
        self._bytes = 0
        self.resets += 1

    def owner_block(self, owner: str) -> OwnerBlock | None:
        """Without moving it in the LRU order (for write callbacks that hold the lock)."""
        return self._blocks.get(owner)

    def each_block(self) -> list[OwnerBlock]:
        return list(self._blocks.values())

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "owners": len(self._blocks),
                "bytes": self._bytes,
                "hits": self.hits,
                "misses": self.misses,
                "resets": self.resets,
                "evictions": self.evictions,
            }


class VectorCache(OwnerBlocks):
    """sqlite-vec's blocks, valid for one `vec_generation` (see the module docstring)."""

    def __init__(self, max_bytes: int):
        super().__init__(max_bytes)
        self._clean: dict[str, int] = {}
        self.known_gen: int | None = None

    # -- reads --------------------------------------------------------------------------

    def block(self, owner: str, gen: int) -> tuple[OwnerBlock | None, bool]:
        """(block, usable): usable is False when this snapshot is older than the cache (the
        caller then searches SQLite). A newer snapshot means a foreign write: reset."""
        with self._lock:
            if self.known_gen is None or gen > self.known_gen:
                self._reset(gen)
            if gen != self.known_gen:
                return None, False
            return self._get(owner), True

    def store(self, owner: str, gen: int, block: OwnerBlock) -> None:
        with self._lock:
            if gen == self.known_gen and owner not in self._blocks:
                self._keep(owner, block)

    def clean_upto(self, owner: str, gen: int) -> int | None:
        with self._lock:
            return self._clean.get(owner) if gen == self.known_gen else None

    def set_clean(self, owner: str, gen: int, memory_id: int) -> None:
        with self._lock:
            if gen == self.known_gen:
                self._clean[owner] = memory_id

    # -- writes (called inside the write transaction, under the database write lock) --------

    def apply(self, gen: int, change: Callable[[VectorCache], None]) -> None:
        """Apply this process's change that moved the generation to `gen`; when the cache
        was not at `gen - 1` (another writer got in between), drop everything instead."""
        with self._lock:
            if self.known_gen is not None and self.known_gen == gen - 1:
                change(self)
                self._bytes = sum(b.nbytes for b in self._blocks.values())
                self.known_gen = gen
            else:
                self._reset(gen)

    def forget_clean(self) -> None:
        """Some memories now wait for a vector: every backfill memo is void."""
        self._clean.clear()

    def invalidate(self) -> None:
        with self._lock:
            self._reset(None)

    def _reset(self, gen: int | None) -> None:
        self._clear()
        self._clean.clear()
        self.known_gen = gen
