"""The `credentials` table on PostgreSQL: the same store as SQLite's
(`memsvc.storage.credentials`, which says why one SHA-256 of a 256-bit secret is enough),
shared by every replica, so a credential created or revoked through one holds at the next
request through any other: each replica's cache of verified credentials reads the change
counter (`version`, advanced by migration 0003's triggers in the writing transaction) on
every request, and there is no cheaper hint to read here (`change_hint` is None).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Sequence

from psycopg.types.json import Jsonb

from memsvc.core.credentials import ALL_TENANTS, Credential, StoredCredential, secret_digest
from memsvc.kernel.errors import ConflictError
from memsvc.storage.credentials import COLUMNS, VERSION_NAME
from memsvc.storage.postgres.database import PgDatabase


def _utc(dt: datetime | None) -> datetime | None:
    """In UTC, as the SQLite store returns them (the session's time zone is the server's)."""
    return None if dt is None else dt.astimezone(timezone.utc)


def _row(row: Sequence[Any]) -> Credential:
    """A row as the core's Credential (jsonb arrives parsed, timestamptz as aware datetimes)."""
    credential_id, permissions, tenants, characters, created_at, revoked_at = row
    return Credential(credential_id, frozenset(permissions), None if ALL_TENANTS in tenants else frozenset(tenants),
                      bool(characters), _utc(created_at), _utc(revoked_at))


class PgCredentialStore:
    def __init__(self, db: PgDatabase):
        self.db = db

    def insert(self, credential: Credential, lookup: str, secret: str) -> Credential:
        """Store a new credential; an id already taken (revoked ones included) is a conflict."""
        try:
            with self.db.write() as conn:
                conn.execute(
                    "INSERT INTO credentials (id, lookup, secret_sha256, permissions, tenants, characters, created_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, now())",
                    (credential.id, lookup, secret_digest(secret), Jsonb(sorted(credential.permissions)),
                     Jsonb(credential.tenant_list()), bool(credential.characters)))
        except ConflictError:  # the database's unique violation, as the core's error
            raise ConflictError(f"a credential with id {credential.id!r} already exists",
                                reason="CREDENTIAL_EXISTS") from None
        return self._get(credential.id)

    def by_lookup(self, lookup: str) -> StoredCredential | None:
        """The credential whose token has this lookup (revoked ones too), with its digest."""
        with self.db.read() as conn:
            row = conn.execute(f"SELECT secret_sha256, {COLUMNS} FROM credentials WHERE lookup = %s",
                               (lookup,)).fetchone()
        return StoredCredential(bytes(row[0]), _row(row[1:])) if row else None

    def version(self) -> int:
        """How many times the credentials changed (one indexed read)."""
        with self.db.read() as conn:
            row = conn.execute("SELECT value FROM sequences WHERE name = %s", (VERSION_NAME,)).fetchone()
        return int(row[0]) if row else 0

    def change_hint(self) -> int | None:
        """Nothing tells a replica that another one committed without asking the server."""
        return None

    def all(self) -> list[Credential]:
        with self.db.read() as conn:
            return [_row(r) for r in conn.execute(f"SELECT {COLUMNS} FROM credentials ORDER BY id COLLATE \"C\"").fetchall()]

    def revoke(self, credential_id: str) -> Credential | None:
        """Revoked from now on (idempotent: a second revoke keeps the first time); None
        when there is no such credential."""
        with self.db.write() as conn:
            conn.execute("UPDATE credentials SET revoked_at = now() WHERE id = %s AND revoked_at IS NULL",
                         (credential_id,))
        return self._get(credential_id)

    def exists(self) -> bool:
        with self.db.read() as conn:
            return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM credentials)").fetchone()[0])

    def _get(self, credential_id: str) -> Credential | None:
        with self.db.read() as conn:
            row = conn.execute(f"SELECT {COLUMNS} FROM credentials WHERE id = %s", (credential_id,)).fetchone()
        return _row(row) if row else None
