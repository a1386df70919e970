"""The process's working sets: one per owner searched, kept current with the store, bounded
by a memory budget.

Coherence. The store stays the only source of truth. It keeps a change sequence (every
insert, update and delete of a memory appends the memory and its owner, in the write's
own transaction) and each owner's newest change number. A search reads that number in its
snapshot (one indexed read) and compares it with the version its working set reflects:
- equal: the set is current;
- greater: another request, worker, process or replica wrote since; the set applies the
  changes after its version (one read of the changed rows), or rebuilds from a snapshot
  when the log no longer reaches back that far;
- smaller: this snapshot is older than the set (a request that began before a write another
  request of this process already applied); the set answers, since the request overlaps
  that write, which it may therefore see or not. (Asking the store instead would rank such
  a request differently, and under steady writes that would be many requests.)
Expiry and retention are times compared on every search, never cached answers.

Memory. The sets are kept in LRU order and the least recently used are dropped while the
total is over the budget; an owner whose set alone exceeds the budget is not kept and is
searched in the store (its build is tried again a minute later), as every owner is with a
budget of 0.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from memsvc.kernel.inline import hold, may_block
from memsvc.kernel.models import KeywordHit, Memory, SearchScope
from memsvc.working_set.owner import OwnerSet, Tokenizer
from memsvc.working_set.past import PastView

T = TypeVar("T")
LOCK_STRIPES = 64
# An owner too large for the budget is searched in the store; building its set again is
# tried this long after the last try (a build reads every row of the owner).
TOO_BIG_RETRY_S = 60.0
#: The most owners' pasts (asOf retrievals' corpora) kept for the next question (`past`).
PAST_VIEWS = 4


class StorePort(Protocol):
    """What a store offers its working sets. `conn` is the request's snapshot (opaque here)."""

    tokenize_document: Tokenizer
    tokenize_query: Tokenizer

    def owner_version(self, conn: Any, owner: str) -> int:
        """The owner's newest change number in this snapshot (0: none recorded)."""
        ...

    def load_owner(self, conn: Any, owner: str) -> tuple[int, list[Memory]]:
        """The owner's version and every memory it has, read in one snapshot."""
        ...

    def changes_since(self, conn: Any, owner: str, version: int) -> tuple[list[int], list[Memory]] | None:
        """The owner's memories changed after `version`: the changed memory ids and the rows
        that still exist (in the owner); None when the log no longer reaches `version`."""
        ...


@dataclass
class WorkingSetStats:
    """Counters since the process started (what is held now is computed in `status`)."""

    builds: int = 0
    updates: int = 0
    store_searches: int = 0
    evictions: int = 0
    #: Owners' pasts built for an asOf retrieval, and asOf retrievals a kept one answered.
    past_builds: int = 0
    past_hits: int = 0


class WorkingSets:
    """Keyword search from memory for owner-scoped searches; None where the store must answer."""

    def __init__(self, port: StorePort, budget_bytes: int) -> None:
        self._port = port
        self.budget_bytes = max(0, int(budget_bytes))
        self._sets: OrderedDict[str, OwnerSet] = OrderedDict()
        # Owners share LOCK_STRIPES locks by hash: a lock per owner ever searched would grow
        # without bound, and two owners sharing one only wait for each other's arithmetic.
        self._stripes = [threading.Lock() for _ in range(LOCK_STRIPES)]
        self._lock = threading.Lock()
        self._too_big: dict[str, float] = {}  # owner -> when it last did not fit (monotonic s)
        #: (owner, instant, owner's change number) -> its past, least recently used first.
        self._pasts: OrderedDict[tuple[str, datetime, int], PastView] = OrderedDict()
        self.stats = WorkingSetStats()

    def status(self) -> dict[str, int]:
        """Owners held, their bytes and the budget, for metrics and engine status."""
        with self._lock:
            return {
                "owners": len(self._sets),
                "bytes": sum(s.nbytes for s in self._sets.values()),
                "budget_bytes": self.budget_bytes,
                "builds": self.stats.builds,
                "updates": self.stats.updates,
                "store_searches": self.stats.store_searches,
                "evictions": self.stats.evictions,
                "past_builds": self.stats.past_builds,
                "past_hits": self.stats.past_hits,
            }

    def past(
        self, conn: Any, owner: str, moment: datetime, read: Callable[[], tuple[Sequence[Memory], int]]
    ) -> PastView:
        """A set of the owner's memories as they were at `moment` (`memsvc.working_set.past`),
        tokenized as the store's own index is, from `read` (the versions valid then, and how
        many current memories began since, in the snapshot of `conn`).

        Building one costs about a cold build of the owner, so the last few are kept for the
        questions that follow about the same instant (an agent asking several things as of
        one date). Each is kept under the owner's change number in the snapshot it was read
        in: any write to the owner's memories since (a deletion included: a past must never
        bring back what was forgotten) moves that number, and the next request builds anew.
        At most PAST_VIEWS are kept, within a quarter of the budget; none with no budget. A
        kept view is only read (its lazy per-word arrays are the same whoever makes them), so
        concurrent requests share it without a lock."""
        version = self._port.owner_version(conn, owner)
        key = (owner, moment, version)
        with self._lock:
            kept = self._pasts.get(key)
            if kept is not None:
                self._pasts.move_to_end(key)
                self.stats.past_hits += 1
                return kept
        may_block("building an owner's memories as they were")
        memories, newer = read()
        view = PastView.build(owner, memories, newer, self._port.tokenize_document, self._port.tokenize_query)
        with self._lock:
            self.stats.past_builds += 1
            self._pasts[key] = view
            total = sum(v.owner_set.nbytes for v in self._pasts.values())
            while self._pasts and (len(self._pasts) > PAST_VIEWS or total > self.budget_bytes // 4):
                _, dropped = self._pasts.popitem(last=False)
                total -= dropped.owner_set.nbytes
        return view

    def clear(self) -> None:
        with self._lock:
            self._sets.clear()
            self._pasts.clear()
            self._too_big.clear()

    def search_keyword(self, conn: Any, scope: SearchScope, text: str, limit: int) -> list[KeywordHit] | None:
        """The owner scope's keyword hits from its working set, or None: no owner, no budget,
        or an owner too large for the budget."""
        return self.answer(conn, scope, lambda owner_set: owner_set.search_keyword(scope, text, limit))

    def memories_in_scope(self, conn: Any, scope: SearchScope, memory_ids: list[int]) -> list[Memory] | None:
        """The memories of these ids the scope may see, from the owner's working set, or None
        where the store must read them (as `answer`)."""
        return self.answer(conn, scope, lambda owner_set: owner_set.in_scope(scope, memory_ids))

    def answer(self, conn: Any, scope: SearchScope, read: Callable[[OwnerSet], T | None]) -> T | None:
        """`read` over the scope owner's current working set, or None where the store must
        answer (no owner, no budget, an owner too large for it, or `read` itself declining)."""
        owner = scope.api_key_id
        if owner is None or self.budget_bytes <= 0:
            return None
        with hold(self._owner_lock(owner), "an owner's working set in another thread's hands"):
            found = self._current(conn, owner)
            answered = None if found is None else read(found)
        if answered is None:
            self.stats.store_searches += 1
        return answered

    def _owner_lock(self, owner: str) -> threading.Lock:
        return self._stripes[hash(owner) % LOCK_STRIPES]

    def _current(self, conn: Any, owner: str) -> OwnerSet | None:
        """The owner's set as this snapshot sees it (caller holds the owner's lock)."""
        too_big = self._too_big.get(owner)
        if too_big is not None and time.monotonic() - too_big < TOO_BIG_RETRY_S:
            return None
        version = self._port.owner_version(conn, owner)
        with self._lock:
            found = self._sets.get(owner)
            if found is not None:
                self._sets.move_to_end(owner)
        if found is None or (found.version < version and not self._apply(conn, found, version)):
            return self._build(conn, owner)
        return found

    def _apply(self, conn: Any, owner_set: OwnerSet, version: int) -> bool:
        """Bring the set from its version to `version`; False when the log cannot."""
        changed = self._port.changes_since(conn, owner_set.owner, owner_set.version)
        if changed is None:
            return False
        ids, rows = changed
        present = {m.memory_id for m in rows}
        for memory_id in ids:
            if memory_id not in present:
                owner_set.discard(memory_id)
        for memory in rows:
            owner_set.put(memory)
        owner_set.version = version
        self.stats.updates += 1
        self._fit()
        return True

    def _build(self, conn: Any, owner: str) -> OwnerSet | None:
        may_block("building an owner's working set")
        version, memories = self._port.load_owner(conn, owner)
        owner_set = OwnerSet.build(owner, memories, self._port.tokenize_document, self._port.tokenize_query)
        owner_set.version = version
        self.stats.builds += 1
        if owner_set.nbytes > self.budget_bytes:
            with self._lock:
                self._sets.pop(owner, None)
                self._too_big[owner] = time.monotonic()
            return None
        with self._lock:
            self._too_big.pop(owner, None)
            self._sets[owner] = owner_set
            self._sets.move_to_end(owner)
        self._fit()
        return owner_set

    def _fit(self) -> None:
        """Drop the least recently used sets while the total is over the budget (a set that
        grew past the budget on its own goes too: its owner is built again, or searched in
        the store, on its next search)."""
        with self._lock:
            total = sum(s.nbytes for s in self._sets.values())
            while total > self.budget_bytes and self._sets:
                _, dropped = self._sets.popitem(last=False)
                total -= dropped.nbytes
                self.stats.evictions += 1
