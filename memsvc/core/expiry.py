"""Removing memories whose expiry has passed.

An expired memory was already never retrieved (expiry is a time every search compares);
removing it makes the expiry mean what its writer asked: the memory is forgotten like a
deletion (its history and versions go, the vectors and Qdrant points with them) and the
change feed tells followers it `expired`. A sweep runs every `MEMSVC_EXPIRY_SWEEP_S` in every
server process; processes sweeping one store at once each delete what is still there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from memsvc.kernel.changes import SYSTEM_AUTHOR, caused_by
from memsvc.kernel.models import Memory, utcnow

log = logging.getLogger("memsvc.core.expiry")
#: Memories removed per transaction: a store with many expiring at once is swept in steps,
#: so no sweep holds the writer for long.
SWEEP_BATCH = 500


class ExpiringStore(Protocol):
    def expire_due(self, now: datetime, limit: int) -> list[Memory]: ...


class ExpirySweep:
    """`sweep()` removes every memory expired by now (the caller's ticker runs it)."""

    def __init__(self, store: ExpiringStore, clock: Callable[[], datetime] = utcnow, batch: int = SWEEP_BATCH):
        self._store = store
        self._clock = clock
        self._batch = batch

    def sweep(self) -> int:
        """Remove expired memories in batches until none is left; returns how many."""
        removed = 0
        now = self._clock()
        with caused_by(author=SYSTEM_AUTHOR):
            while True:
                expired = self._store.expire_due(now, self._batch)
                removed += len(expired)
                if len(expired) < self._batch:
                    break
        if removed:
            log.info("memory.expired", extra={"count": removed})
        return removed
