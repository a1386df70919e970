"""The `credentials` table (migration 0006): credentials with their secrets as hashes.

Why SHA-256 and not a slow password hash (bcrypt, scrypt, argon2): a slow KDF protects
low-entropy secrets that people choose, where an attacker holding the table can guess. A
credential's secret is 256 random bits from `secrets`; no guessing finishes, however fast
the hash, so one SHA-256 is as safe as a KDF and costs a microsecond per request instead of
tens of milliseconds.

Verification is a constant-time comparison of the digests (memsvc.core.credentials, which
caches the rows it read): the store hands out a row by its unique `lookup` and the number of
credential changes (`version`, advanced by migration 0011's triggers in every writing
transaction), which is all a cache needs to know it is current.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import apsw

from memsvc.core.credentials import ALL_TENANTS, Credential, StoredCredential, secret_digest
from memsvc.kernel.errors import ConflictError
from memsvc.kernel.models import utcnow
from memsvc.storage.database import Database, iso, parse_iso

COLUMNS = "id, permissions, tenants, characters, created_at, revoked_at"
#: The row of `sequences` every credential write advances (migration 0011).
VERSION_NAME = "credentials"


def _row(row: Sequence[Any]) -> Credential:
    credential_id, permissions, tenants, characters, created_at, revoked_at = row
    names = json.loads(tenants)
    return Credential(credential_id, frozenset(json.loads(permissions)),
                      None if ALL_TENANTS in names else frozenset(names), bool(characters),
                      parse_iso(created_at), parse_iso(revoked_at))


class SqliteCredentialStore:
    def __init__(self, db: Database):
        self.db = db

    def insert(self, credential: Credential, lookup: str, secret: str) -> Credential:
        """Store a new credential; an id already taken (revoked ones included) is a conflict."""
        created = iso(utcnow())
        try:
            with self.db.write() as conn:
                conn.execute(
                    "INSERT INTO credentials (id, lookup, secret_sha256, permissions, tenants, characters, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (credential.id, lookup, secret_digest(secret), json.dumps(sorted(credential.permissions)),
                     json.dumps(credential.tenant_list()), int(credential.characters), created))
        except apsw.ConstraintError:
            raise ConflictError(f"a credential with id {credential.id!r} already exists",
                                reason="CREDENTIAL_EXISTS") from None
        return self._get(credential.id)

    def by_lookup(self, lookup: str) -> StoredCredential | None:
        """The credential whose token has this lookup (revoked ones too), with its digest."""
        with self.db.read() as conn:
            rows = conn.execute(f"SELECT secret_sha256, {COLUMNS} FROM credentials WHERE lookup = ?", (lookup,)).fetchall()
        return StoredCredential(bytes(rows[0][0]), _row(rows[0][1:])) if rows else None

    def version(self) -> int:
        """How many times the credentials changed (one indexed read)."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT value FROM sequences WHERE name = ?", (VERSION_NAME,)).fetchall()
        return int(rows[0][0]) if rows else 0

    def change_hint(self) -> int | None:
        """A number that stays put while nobody commits anything to the file (any process),
        read without waiting; None when it cannot be had at once (see Database)."""
        return self.db.data_version_nowait()

    def all(self) -> list[Credential]:
        with self.db.read() as conn:
            return [_row(r) for r in conn.execute(f"SELECT {COLUMNS} FROM credentials ORDER BY id").fetchall()]

    def revoke(self, credential_id: str) -> Credential | None:
        """Revoked from now on (idempotent: a second revoke keeps the first time); None
        when there is no such credential."""
        with self.db.write() as conn:
            conn.execute("UPDATE credentials SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                         (iso(utcnow()), credential_id))
        return self._get(credential_id)

    def exists(self) -> bool:
        with self.db.read() as conn:
            return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM credentials)").fetchall()[0][0])

    def _get(self, credential_id: str) -> Credential | None:
        with self.db.read() as conn:
            rows = conn.execute(f"SELECT {COLUMNS} FROM credentials WHERE id = ?", (credential_id,)).fetchall()
        return _row(rows[0]) if rows else None
