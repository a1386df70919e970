"""Leases: a job that must run once per database (not once per process) holds a named lease.

Several server processes share one database. A lease row names the job, its holder (this
process's pid and a random token, new for each acquisition) and when it expires. Acquiring
inserts the row or takes it over once it has expired, in one write transaction, so at most
one process holds it; the holder's heartbeat renews it every `renew_s` while the job runs.
A holder that dies (SIGKILL, a crash) stops renewing, and its lease is taken over by the
next caller `ttl_s` after the last renewal at the latest. A holder that could not renew in
time and finds another holder in its place has lost the lease: `Lease.lost` tells the job
to stop. The holder also publishes its progress in the row, which is how the other
processes report the job and follow it.

Expiry uses the wall clock (time.time), which every process on the host shares; a clock
stepped by more than the TTL can expire a live lease early or keep a dead one late.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger("memsvc.core.leases")

#: Seconds a lease lives without a renewal: how long a killed holder blocks the job.
DEFAULT_TTL_S = 15.0
#: The heartbeat renews every TTL / RENEWALS_PER_TTL seconds, so two renewals may fail
#: (a busy database, a stalled thread) before the lease lapses.
RENEWALS_PER_TTL = 3
#: How often a process following another process's job polls the lease row.
POLL_S = 0.25


@dataclass(frozen=True)
class LeaseRecord:
    """A lease row as read, with the clock of the read (`live`: not expired then)."""

    name: str
    holder: str
    expires_at: float
    payload: str | None
    seq: int
    now: float

    @property
    def live(self) -> bool:
        return self.expires_at > self.now


class LeaseStore(Protocol):
    """Where leases live (the store's `leases` table, memsvc.storage.leases); each call one transaction."""

    def acquire(self, name: str, holder: str, ttl_s: float) -> bool:
        """Take the lease when it is free, expired or already `holder`'s."""
        ...

    def renew(self, name: str, holder: str, ttl_s: float, payload: str | None = None) -> bool:
        """Extend `holder`'s lease (and store `payload` when given); False when another
        process holds it now, changing nothing."""
        ...

    def release(self, name: str, holder: str, payload: str | None = None) -> bool:
        """End `holder`'s lease at once, keeping the row (and storing `payload` when given)."""
        ...

    def read(self, name: str) -> LeaseRecord | None: ...


@dataclass(frozen=True)
class LeaseTiming:
    ttl_s: float = DEFAULT_TTL_S
    poll_s: float = POLL_S

    @property
    def renew_s(self) -> float:
        return self.ttl_s / RENEWALS_PER_TTL


def new_holder_id() -> str:
    """pid (to tell the operator which process) and a random token (a restarted process
    that got the same pid is another holder)."""
    return f"{os.getpid()}-{secrets.token_hex(6)}"


class Lease:
    """A held lease and its heartbeat thread; `release()` stops both."""

    def __init__(self, store: LeaseStore, name: str, holder: str, timing: LeaseTiming):
        self.store = store
        self.name = name
        self.holder = holder
        self.timing = timing
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"memsvc-lease-{name}", daemon=True)

    @classmethod
    def try_acquire(cls, store: LeaseStore, name: str, timing: LeaseTiming) -> Lease | None:
        """The lease with its heartbeat running, or None when another process holds it."""
        holder = new_holder_id()
        if not store.acquire(name, holder, timing.ttl_s):
            return None
        lease = cls(store, name, holder, timing)
        lease._thread.start()
        return lease

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def publish(self, payload: str) -> bool:
        """Store `payload` for the other processes (renewing too); False once lost."""
        if self.lost:
            return False
        if not self.store.renew(self.name, self.holder, self.timing.ttl_s, payload):
            self._lost.set()
        return not self.lost

    def release(self, payload: str | None = None) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(self.timing.ttl_s)
        if not self.lost:
            self.store.release(self.name, self.holder, payload)

    def _beat(self) -> None:
        while not self._stop.wait(self.timing.renew_s):
            try:
                if not self.store.renew(self.name, self.holder, self.timing.ttl_s):
                    log.error("lease.lost", extra={"lease": self.name, "holder": self.holder})
                    self._lost.set()
                    return
            except Exception as exc:  # noqa: BLE001 - a busy database: try again next beat
                log.warning("lease.renew_failed", extra={"lease": self.name, "error_type": type(exc).__name__})
