"""SQL of the leases (migration 0008): single-flight jobs across the processes that share
the database. The rules (who may hold, the heartbeat) are `memsvc.core.leases`; each method
here is one write transaction (`BEGIN IMMEDIATE` takes the file's write lock first, so an
acquisition's check and its write cannot interleave with another process's)."""

from __future__ import annotations

import time
from typing import Callable

from memsvc.core.leases import LeaseRecord
from memsvc.kernel.models import utcnow
from memsvc.storage.database import Database, iso

# Insert, or take over a row that has expired (or is already this holder's). The WHERE of
# the upsert leaves a live row of another holder untouched; changes() tells which happened.
_ACQUIRE = (
    "INSERT INTO leases (name, holder, expires_at, acquired_at, payload, seq) VALUES (?, ?, ?, ?, NULL, 0) "
    "ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, "
    "acquired_at = excluded.acquired_at, payload = NULL, seq = leases.seq + 1 "
    "WHERE leases.expires_at <= ? OR leases.holder = excluded.holder"
)


class SqliteLeaseStore:
    """`clock` is the wall clock in Unix seconds (tests pass their own)."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time):
        self.db = db
        self.clock = clock

    def acquire(self, name: str, holder: str, ttl_s: float) -> bool:
        now = self.clock()
        with self.db.write() as conn:
            conn.execute(_ACQUIRE, (name, holder, now + ttl_s, iso(utcnow()), now))
            return conn.changes() > 0

    def renew(self, name: str, holder: str, ttl_s: float, payload: str | None = None) -> bool:
        now = self.clock()
        with self.db.write() as conn:
            if payload is None:
                conn.execute("UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ?",
                             (now + ttl_s, name, holder))
            else:
                conn.execute("UPDATE leases SET expires_at = ?, payload = ?, seq = seq + 1 "
                             "WHERE name = ? AND holder = ?", (now + ttl_s, payload, name, holder))
            return conn.changes() > 0

    def release(self, name: str, holder: str, payload: str | None = None) -> bool:
        with self.db.write() as conn:
            conn.execute("UPDATE leases SET expires_at = 0, payload = COALESCE(?, payload), "
                         "seq = seq + (? IS NOT NULL) WHERE name = ? AND holder = ?", (payload, payload, name, holder))
            return conn.changes() > 0

    def read(self, name: str) -> LeaseRecord | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT name, holder, expires_at, payload, seq FROM leases WHERE name = ?",
                               (name,)).fetchone()
        if row is None:
            return None
        return LeaseRecord(row[0], row[1], float(row[2]), row[3], int(row[4]), self.clock())
