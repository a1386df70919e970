"""Group commit: concurrent callers' items written together, in one batch (one transaction).

Why: SQLite has one writer, and every write transaction pays a fixed cost (taking the
writer lock, BEGIN, COMMIT, the WAL append) beside the work of its rows. Eight clients
creating memories one transaction each queue on that cost; gathered into one transaction
they pay it once.

How (leader/follower, no thread of its own): a caller appends its item to the queue. If no
batch is running it becomes the leader: it takes the queue (up to `max_batch` items, its own
first), runs the batch, hands every caller its own outcome, then passes the lead to the
oldest item still waiting, whose caller runs the next batch. The others wait; the items
that arrive while a batch runs form the next one, so batches grow with the load and a lone
caller pays no wait at all. Each leader runs one batch only, so no caller serves others
indefinitely.

A caller returns when its batch has finished, i.e. after the commit: an acknowledged item is
durable. Outcomes are per item: the batch function reports a failed item as its exception,
and an exception of the batch function itself goes to every caller of that batch.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_WAITING, _LEADING, _DONE = 0, 1, 2


class _Slot(Generic[T]):
    __slots__ = ("item", "outcome", "state", "wake")

    def __init__(self, item: T):
        self.item = item
        self.state = _WAITING
        self.outcome: object = None
        self.wake = threading.Event()


class GroupCommit(Generic[T, R]):
    """`submit(item)` from any number of threads; `run_batch(items)` returns one outcome per
    item, in order: a result, or the exception that item failed with."""

    def __init__(self, run_batch: Callable[[list[T]], Sequence[R | BaseException]], max_batch: int = 128):
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._run_batch = run_batch
        self._max_batch = int(max_batch)
        self._lock = threading.Lock()
        self._queue: deque[_Slot[T]] = deque()
        self._leading = False
        #: Batches finished and their items (items / batches = the mean batch size), and the
        #: items of the batch running now.
        self.batches = 0
        self.items = 0
        self.running = 0

    def submit(self, item: T) -> R:
        """Write `item` with whatever else is waiting; returns its result once its batch has
        finished, or raises the exception it failed with."""
        slot: _Slot[T] = _Slot(item)
        with self._lock:
            self._queue.append(slot)
            lead = not self._leading
            self._leading = True
        if not lead:
            slot.wake.wait()
        if slot.state != _DONE:  # the lead is ours: the queue's head, so our item is in the batch
            self._lead()
        if isinstance(slot.outcome, BaseException):
            raise slot.outcome
        return slot.outcome  # type: ignore[return-value]

    def waiting(self) -> int:
        """Items queued and not yet taken into a batch."""
        with self._lock:
            return len(self._queue)

    def _lead(self) -> None:
        with self._lock:
            batch = [self._queue.popleft() for _ in range(min(self._max_batch, len(self._queue)))]
            self.running = len(batch)
        try:
            outcomes = list(self._run_batch([slot.item for slot in batch]))
            if len(outcomes) != len(batch):
                raise RuntimeError(f"a batch of {len(batch)} items returned {len(outcomes)} outcomes")
        except BaseException as exc:  # noqa: BLE001 - every caller of the batch gets it
            outcomes = [exc] * len(batch)
        for slot, outcome in zip(batch, outcomes):
            slot.outcome = outcome
            slot.state = _DONE
            slot.wake.set()
        with self._lock:
            self.batches += 1
            self.items += len(batch)
            self.running = 0
            if self._queue:
                head = self._queue[0]
                head.state = _LEADING
                head.wake.set()
            else:
                self._leading = False
