"""SQL of the leases on PostgreSQL: single-flight jobs across the replicas that share the
database. The rules (who may hold, the heartbeat) are `memsvc.core.leases`; each method is
one statement in a transaction of its own.

Expiry is measured by the database server's clock (`now()`), not by each process's: the
replicas of a shared-store deployment run on several hosts whose clocks may disagree by more
than a lease's TTL, and the server's clock is the one they all see. `expires_at` is stored
in Unix seconds of that clock, and a read reports the server's time beside it, so
`LeaseRecord.live` compares two readings of one clock.

Acquiring is one upsert: the row is inserted, or taken over only when it has expired or is
already this holder's (the WHERE of ON CONFLICT). Two replicas racing for a free or expired
lease queue on the row's lock; the second one re-reads the row the first committed and its
WHERE no longer holds, so exactly one of them gets it.
"""

from __future__ import annotations

from memsvc.core.leases import LeaseRecord
from memsvc.storage.postgres.database import PgDatabase

_NOW = "extract(epoch FROM now())::float8"

_ACQUIRE = (
    "INSERT INTO leases (name, holder, expires_at, acquired_at, payload, seq) "
    f"VALUES (%s, %s, {_NOW} + %s, now(), NULL, 0) "
    "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, "
    "acquired_at = excluded.acquired_at, payload = NULL, seq = leases.seq + 1 "
    f"WHERE leases.expires_at <= {_NOW} OR leases.holder = excluded.holder"
)


class PgLeaseStore:
    def __init__(self, db: PgDatabase):
        self.db = db

    def acquire(self, name: str, holder: str, ttl_s: float) -> bool:
        with self.db.write() as conn:
            return conn.execute(_ACQUIRE, (name, holder, float(ttl_s))).rowcount > 0

    def renew(self, name: str, holder: str, ttl_s: float, payload: str | None = None) -> bool:
        with self.db.write() as conn:
            if payload is None:
                cur = conn.execute(f"UPDATE leases SET expires_at = {_NOW} + %s WHERE name = %s AND holder = %s",
                                   (float(ttl_s), name, holder))
            else:
                cur = conn.execute(f"UPDATE leases SET expires_at = {_NOW} + %s, payload = %s, seq = seq + 1 "
                                   "WHERE name = %s AND holder = %s", (float(ttl_s), payload, name, holder))
            return cur.rowcount > 0

    def release(self, name: str, holder: str, payload: str | None = None) -> bool:
        with self.db.write() as conn:
            if payload is None:
                cur = conn.execute("UPDATE leases SET expires_at = 0 WHERE name = %s AND holder = %s", (name, holder))
            else:
                cur = conn.execute("UPDATE leases SET expires_at = 0, payload = %s, seq = seq + 1 "
                                   "WHERE name = %s AND holder = %s", (payload, name, holder))
            return cur.rowcount > 0

    def read(self, name: str) -> LeaseRecord | None:
        with self.db.read() as conn:
            row = conn.execute(f"SELECT name, holder, expires_at, payload, seq, {_NOW} FROM leases WHERE name = %s",
                               (name,)).fetchone()
        if row is None:
            return None
        return LeaseRecord(row[0], row[1], float(row[2]), row[3], int(row[4]), float(row[5]))
