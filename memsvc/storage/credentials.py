"""The `credentials` table: credentials with their secrets as hashes. One store for both
databases; on PostgreSQL every replica shares it, so a credential created or revoked through
one holds at the next request through any other.

Why SHA-256 and not a slow password hash (bcrypt, scrypt, argon2): a slow KDF protects
low-entropy secrets that people choose, where an attacker holding the table can guess. A
credential's secret is 256 random bits from `secrets`; no guessing finishes, however fast
the hash, so one SHA-256 is as safe as a KDF and costs a microsecond per request instead of
tens of milliseconds.

Verification is a constant-time comparison of the digests (memsvc.core.credentials, which
caches the rows it read): the store hands out a row by its unique `lookup` and the number of
credential changes (`version`, advanced by triggers in every writing transaction: SQLite's
migration 0011, PostgreSQL's 0003), which is all a cache needs to know it is current.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import apsw

from memsvc.core.credentials import ALL_TENANTS, Credential, StoredCredential, secret_digest
from memsvc.kernel.errors import ConflictError
from memsvc.storage.database import Database
from memsvc.storage.dialect import syntax_of

COLUMNS = "id, permissions, tenants, characters, created_at, revoked_at"
#: The row of `sequences` every credential write advances.
VERSION_NAME = "credentials"
_INSERT = (
    "INSERT INTO credentials (id, lookup, secret_sha256, permissions, tenants, characters, created_at)"
    " VALUES (?, ?, ?, {json}, {json}, {bool}, {now})"
)
_REVOKE = "UPDATE credentials SET revoked_at = {now} WHERE id = ? AND revoked_at IS NULL"


class SqlCredentialStore:
    """`db`: a `Database` or a `PgDatabase`."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.syntax = syntax_of(db)

    def _row(self, row: Sequence[Any]) -> Credential:
        credential_id, permissions, tenants, characters, created_at, revoked_at = row
        names = self.syntax.read_json(tenants)
        return Credential(
            credential_id,
            frozenset(self.syntax.read_json(permissions)),
            None if ALL_TENANTS in names else frozenset(names),
            bool(characters),
            self.syntax.read_time(created_at),
            self.syntax.read_time(revoked_at),
        )

    def _one(self, sql: str, params: Sequence[Any]) -> Any:
        with self.db.read() as conn:
            return conn.execute(self.syntax.sql(sql), params).fetchone()

    def insert(self, credential: Credential, lookup: str, secret: str) -> Credential:
        """Store a new credential; an id already taken (revoked ones included) is a conflict."""
        params = (
            credential.id,
            lookup,
            secret_digest(secret),
            json.dumps(sorted(credential.permissions)),
            json.dumps(credential.tenant_list()),
            bool(credential.characters),
            *self.syntax.now_params(),
        )
        try:
            with self.db.write() as conn:
                conn.execute(self.syntax.sql(_INSERT), params)
        except (apsw.ConstraintError, ConflictError):  # PostgreSQL's unique violation arrives as ConflictError
            raise ConflictError(
                f"a credential with id {credential.id!r} already exists", reason="CREDENTIAL_EXISTS"
            ) from None
        found = self._get(credential.id)
        assert found is not None  # just inserted
        return found

    def by_lookup(self, lookup: str) -> StoredCredential | None:
        """The credential whose token has this lookup (revoked ones too), with its digest."""
        row = self._one(f"SELECT secret_sha256, {COLUMNS} FROM credentials WHERE lookup = ?", (lookup,))
        return StoredCredential(bytes(row[0]), self._row(row[1:])) if row else None

    def version(self) -> int:
        """How many times the credentials changed (one indexed read)."""
        row = self._one("SELECT value FROM sequences WHERE name = ?", (VERSION_NAME,))
        return int(row[0]) if row else 0

    def change_hint(self) -> int | None:
        """On SQLite, a number that stays put while nobody commits anything to the file (any
        process), read without waiting; None when it cannot be had at once (see Database).
        On PostgreSQL always None: nothing tells a replica that another one committed
        without asking the server."""
        return self.db.data_version_nowait() if isinstance(self.db, Database) else None

    def all(self) -> list[Credential]:
        with self.db.read() as conn:
            rows = conn.execute(self.syntax.sql(f"SELECT {COLUMNS} FROM credentials ORDER BY id{{bytewise}}"))
            return [self._row(r) for r in rows.fetchall()]

    def revoke(self, credential_id: str) -> Credential | None:
        """Revoked from now on (idempotent: a second revoke keeps the first time); None
        when there is no such credential."""
        with self.db.write() as conn:
            conn.execute(self.syntax.sql(_REVOKE), (*self.syntax.now_params(), credential_id))
        return self._get(credential_id)

    def exists(self) -> bool:
        return bool(self._one("SELECT EXISTS (SELECT 1 FROM credentials)", ())[0])

    def _get(self, credential_id: str) -> Credential | None:
        row = self._one(f"SELECT {COLUMNS} FROM credentials WHERE id = ?", (credential_id,))
        return self._row(row) if row else None


#: The names the callers and the contract suite construct.
SqliteCredentialStore = SqlCredentialStore
