"""The `credentials` table (migration 0006): credentials with their secrets as hashes.

Why SHA-256 and not a slow password hash (bcrypt, scrypt, argon2): a slow KDF protects
low-entropy secrets that people choose, where an attacker holding the table can guess. A
credential's secret is 256 random bits from `secrets`; no guessing finishes, however fast
the hash, so one SHA-256 is as safe as a KDF and costs a microsecond per request instead of
tens of milliseconds.

Verification is one read of the row by its unique `lookup` and a constant-time comparison
of the digests, whatever the outcome, so timing tells nothing about the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Sequence

import apsw

from memsvc.core.credentials import ALL_TENANTS, Credential
from memsvc.core.errors import ConflictError
from memsvc.core.models import utcnow
from memsvc.storage.database import Database, iso, parse_iso

COLUMNS = "id, permissions, tenants, characters, created_at, revoked_at"
# Compared against when no row matches, so an unknown lookup costs what a wrong secret does.
_NO_DIGEST = bytes(32)


def secret_digest(secret: str) -> bytes:
    """What the table stores of a secret (see the module docstring for why SHA-256)."""
    return hashlib.sha256(secret.encode("utf-8")).digest()


def secret_matches(secret: str, stored: bytes | None) -> bool:
    """Whether `secret` hashes to `stored` (None: no row had the lookup), compared in
    constant time either way, so timing tells nothing about the secret or the lookup."""
    matched = hmac.compare_digest(secret_digest(secret), _NO_DIGEST if stored is None else stored)
    return matched and stored is not None


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

    def find(self, lookup: str, secret: str) -> Credential | None:
        """The active credential with this lookup and secret, else None."""
        with self.db.read() as conn:
            rows = conn.execute(f"SELECT secret_sha256, {COLUMNS} FROM credentials WHERE lookup = ?",
                                (lookup,)).fetchall()
        if not secret_matches(secret, bytes(rows[0][0]) if rows else None):
            return None
        credential = _row(rows[0][1:])
        return None if credential.revoked_at is not None else credential

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
