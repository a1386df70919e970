"""SQL of the leases: single-flight jobs across the processes (or replicas) that share the
database. The rules (who may hold, the heartbeat) are `memsvc.core.leases`; each method here
is one statement in a write transaction of its own. One store for both databases.

Whose clock measures expiry: on PostgreSQL the database server's (`now()`), not each
process's: the replicas of a shared-store deployment run on several hosts whose clocks may
disagree by more than a lease's TTL, and the server's clock is the one they all see. On
SQLite every process is on the file's host, so the process's clock serves (tests pass their
own). `expires_at` is stored in Unix seconds of that clock, and a read reports that clock's
time beside it, so `LeaseRecord.live` compares two readings of one clock.

Acquiring is one upsert: the row is inserted, or taken over only when it has expired or is
already this holder's (the WHERE of ON CONFLICT leaves a live row of another holder
untouched; RETURNING tells which happened). SQLite's `BEGIN IMMEDIATE` takes the file's write
lock first; two PostgreSQL replicas racing for a free or expired lease queue on the row's
lock, and the second one re-reads the row the first committed and its WHERE no longer holds,
so exactly one of them gets it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from memsvc.core.leases import LeaseRecord
from memsvc.storage.dialect import SQLITE_SQL, syntax_of

#: `{clock}` on PostgreSQL: the server's time in Unix seconds.
_SERVER_CLOCK = "extract(epoch FROM now())::float8"
_ACQUIRE = (
    "INSERT INTO leases (name, holder, expires_at, acquired_at, payload, seq) "
    "VALUES (?, ?, {clock} + ?, {now}, NULL, 0) "
    "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, "
    "acquired_at = excluded.acquired_at, payload = NULL, seq = leases.seq + 1 "
    "WHERE leases.expires_at <= {clock} OR leases.holder = excluded.holder RETURNING 1"
)
_RENEW = "UPDATE leases SET expires_at = {clock} + ? WHERE name = ? AND holder = ? RETURNING 1"
_RENEW_WITH = (
    "UPDATE leases SET expires_at = {clock} + ?, payload = ?, seq = seq + 1 WHERE name = ? AND holder = ? RETURNING 1"
)
_RELEASE = "UPDATE leases SET expires_at = 0 WHERE name = ? AND holder = ? RETURNING 1"
_RELEASE_WITH = "UPDATE leases SET expires_at = 0, payload = ?, seq = seq + 1 WHERE name = ? AND holder = ? RETURNING 1"
_READ = "SELECT name, holder, expires_at, payload, seq, {clock} FROM leases WHERE name = ?"


class SqlLeaseStore:
    """`db`: a `Database` or a `PgDatabase`. `clock`: Unix seconds; None takes the process's
    on SQLite and the server's on PostgreSQL (see the module docstring)."""

    def __init__(self, db: Any, clock: Callable[[], float] | None = None) -> None:
        self.db = db
        self.syntax = syntax_of(db)
        self.clock = time.time if clock is None and self.syntax is SQLITE_SQL else clock
        self._clock_sql = "?" if self.clock is not None else _SERVER_CLOCK

    def _run(self, template: str, params: list[Any]) -> bool:
        """One statement in a write transaction of its own; whether it changed a row."""
        with self.db.write() as conn:
            return bool(conn.execute(self._sql(template), params).fetchall())

    def _sql(self, template: str) -> str:
        return self.syntax.sql(template.replace("{clock}", self._clock_sql))

    def _now(self) -> list[Any]:
        """What `{clock}` binds: this clock's time, or nothing (the server's)."""
        return [] if self.clock is None else [self.clock()]

    def acquire(self, name: str, holder: str, ttl_s: float) -> bool:
        now = self._now()
        return self._run(_ACQUIRE, [name, holder, *now, float(ttl_s), *self.syntax.now_params(), *now])

    def renew(self, name: str, holder: str, ttl_s: float, payload: str | None = None) -> bool:
        if payload is None:
            return self._run(_RENEW, [*self._now(), float(ttl_s), name, holder])
        return self._run(_RENEW_WITH, [*self._now(), float(ttl_s), payload, name, holder])

    def release(self, name: str, holder: str, payload: str | None = None) -> bool:
        if payload is None:
            return self._run(_RELEASE, [name, holder])
        return self._run(_RELEASE_WITH, [payload, name, holder])

    def read(self, name: str) -> LeaseRecord | None:
        with self.db.read() as conn:
            row = conn.execute(self._sql(_READ), [*self._now(), name]).fetchone()
        if row is None:
            return None
        return LeaseRecord(row[0], row[1], float(row[2]), row[3], int(row[4]), float(row[5]))


#: The names the callers and the contract suite construct.
SqliteLeaseStore = SqlLeaseStore
