"""Per-owner in-memory vector matrices for the sqlite-vec tier, kept coherent with writes.

Why: a KNN over one owner's vectors in vec0 reads them chunk by chunk through SQLite and
computes distances one vector at a time (bench/knn_bench.py: about 6× the time of a NumPy
scan over the same vectors). Here each searched owner's vectors live in one contiguous,
L2-normalized float32 matrix, and a search is one matrix-vector product over that owner's
rows only (other owners' data costs nothing), with the scope filters (session, expiry,
retention) as vector masks — exact cosine, so recall@k is 1.0 against the exact answer.

Coherence. vec0 stays the source of truth; this is a cache of it. Every transaction that
changes vectors bumps the `vec_generation` row of `sequences` (in the same transaction).
The cache remembers the generation it reflects (`known_gen`):
- this process's own vector writes apply their change to the cache inside the write
  transaction and move `known_gen` one step (a rollback drops the whole cache);
- a search reads the generation in its snapshot: equal → the cache is current; greater →
  another process (or a direct SQL write) changed vectors, so the cache is dropped and
  rebuilt lazily; smaller → the snapshot is older than the cache, so that one search reads
  SQLite directly.
Memory is bounded (LRU over owners by bytes); an owner larger than the bound is never cached
and is searched in SQLite.

The cache also remembers, per owner, the highest memory_id up to which the owner is known to
have no memory waiting for a vector (`clean_upto`), so the lazy backfill before a search
need not scan every row of a large owner on every request.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable

import numpy as np

_DEAD_EXPIRY = np.iinfo(np.int64).min


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

    @classmethod
    def from_arrays(cls, dim: int, ids: np.ndarray, matrix: np.ndarray, sessions: list[str],
                    created: np.ndarray, expires: np.ndarray) -> "OwnerBlock":
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
            arr[n: self.used] = -1 if name == "ids" else (_DEAD_EXPIRY if name == "expires" else 0)
        self.slots = {int(mid): i for i, mid in enumerate(self.ids[:n])}
        self.used, self.dead = n, 0

    def search(self, query: np.ndarray, k: int, now_us: int, created_after_us: int | None,
               session: str | None) -> list[tuple[int, float]]:
        """The k nearest live vectors in scope as (memory_id, cosine distance), nearest first
        (ties by memory_id). `query` must be L2-normalized."""
        with self.lock:
            n = self.used
            if n == 0:
                return []
            sims = self.matrix[:n] @ query
            mask = self.expires[:n] > now_us
            if created_after_us is not None:
                mask &= self.created[:n] >= created_after_us
            if session is not None:
                code = self.session_codes.get(session)
                if code is None:
                    return []
                mask &= self.session[:n] == code
            candidates = np.flatnonzero(mask)
            if candidates.size == 0:
                return []
            if candidates.size < n:
                sims = sims[candidates]
            else:
                candidates = None
            k = min(k, sims.size)
            top = np.argpartition(-sims, k - 1)[:k] if k < sims.size else np.arange(sims.size)
            chosen = top if candidates is None else candidates[top]
            mids = self.ids[chosen].copy()
        dist = 1.0 - sims[top].astype(np.float64)
        order = np.lexsort((mids, dist))
        return [(int(mids[i]), float(max(dist[i], 0.0))) for i in order]


class VectorCache:
    """The owners' blocks, LRU by bytes, valid for one `vec_generation` (see module doc)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = int(max_bytes)
        self._lock = threading.Lock()
        self._blocks: OrderedDict[str, OwnerBlock] = OrderedDict()
        self._clean: dict[str, int] = {}
        self._bytes = 0
        self.known_gen: int | None = None
        self.hits = 0
        self.misses = 0
        self.resets = 0

    # -- reads --------------------------------------------------------------------------

    def block(self, owner: str, gen: int) -> tuple[OwnerBlock | None, bool]:
        """(block, usable): usable is False when this snapshot is older than the cache (the
        caller then searches SQLite). A newer snapshot means a foreign write: reset."""
        with self._lock:
            if self.known_gen is None or gen > self.known_gen:
                self._reset(gen)
            if gen != self.known_gen:
                return None, False
            block = self._blocks.get(owner)
            if block is not None:
                self._blocks.move_to_end(owner)
                self.hits += 1
            else:
                self.misses += 1
            return block, True

    def fits(self, nbytes: int) -> bool:
        return nbytes <= self.max_bytes

    def store(self, owner: str, gen: int, block: OwnerBlock) -> None:
        with self._lock:
            if gen != self.known_gen or owner in self._blocks or block.nbytes > self.max_bytes:
                return
            self._blocks[owner] = block
            self._bytes += block.nbytes
            while self._bytes > self.max_bytes and self._blocks:
                _, evicted = self._blocks.popitem(last=False)
                self._bytes -= evicted.nbytes

    def clean_upto(self, owner: str, gen: int) -> int | None:
        with self._lock:
            return self._clean.get(owner) if gen == self.known_gen else None

    def set_clean(self, owner: str, gen: int, memory_id: int) -> None:
        with self._lock:
            if gen == self.known_gen:
                self._clean[owner] = memory_id

    # -- writes (called inside the write transaction, under the database write lock) --------

    def apply(self, gen: int, change: Callable[["VectorCache"], None]) -> None:
        """Apply this process's change that moved the generation to `gen`; when the cache
        was not at `gen - 1` (another writer got in between), drop everything instead."""
        with self._lock:
            if self.known_gen is not None and self.known_gen == gen - 1:
                change(self)
                self._bytes = sum(b.nbytes for b in self._blocks.values())
                self.known_gen = gen
            else:
                self._reset(gen)

    def owner_block(self, owner: str) -> OwnerBlock | None:
        """For `apply` callbacks (the cache lock is held)."""
        return self._blocks.get(owner)

    def each_block(self):
        return list(self._blocks.values())

    def forget_clean(self) -> None:
        """Some memories now wait for a vector: every backfill memo is void."""
        self._clean.clear()

    def invalidate(self) -> None:
        with self._lock:
            self._reset(None)

    def _reset(self, gen: int | None) -> None:
        self._blocks.clear()
        self._clean.clear()
        self._bytes = 0
        self.known_gen = gen
        self.resets += 1

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"owners": len(self._blocks), "bytes": self._bytes, "hits": self.hits, "misses": self.misses,
                    "resets": self.resets}
