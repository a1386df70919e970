"""Credentials: which bearer token may call what, on whose memories.

A credential is an operator-chosen id, a secret (the bearer token, shown once when it is
created, stored only as a hash), a set of permissions and the tenants it may address:

- `read:memory`   list, get, search and retrieve memories (and read character memory);
- `write:memory`  create, update, delete, clear and extract memories (and write character
                  memory). It does not imply `read:memory`: an ingest-only token is possible;
- `admin`         everything: settings, Qdrant, reindex, engine status, summarizing across
                  tenants, global retrieval, legacy scan and purge, character rename, the
                  review and powerful-memory toggles, credential management. An admin
                  credential addresses every tenant and character memory.

Tenants are a list of `apiKeyId`s or `*` (every apiKeyId); character memory (recent-history
files) has no apiKeyId, so access to it is a separate yes/no. Nothing here knows how
credentials are stored; `memsvc.storage.credentials` does.

Verified credentials are cached per process (`Credentials`), and the cache is only ever
trusted under the store's change counter of the credentials, so a revocation anywhere still
holds from the next request.

The request's allowed tenants travel in `tenant_scope` (set by the API's auth interceptor):
where a query names no apiKeyId, the core confines it to those tenants instead of reading
every tenant, and it never widens retrieval to the global scope for a confined caller.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from memsvc.kernel.errors import NotFoundError, Violations, shorten
from memsvc.kernel.models import MemoryFilter

READ = "read:memory"
WRITE = "write:memory"
ADMIN = "admin"
PERMISSIONS = (READ, WRITE, ADMIN)
ALL_TENANTS = "*"
MAX_ID_CHARS = 64
MAX_TENANT_CHARS = 256
MAX_TENANTS = 1000
# Letters, digits, dot, dash, underscore: never ":", so an operator's id cannot pose as one
# of the `env:N` ids given to MEMSVC_API_TOKENS tokens.
_ID = re.compile(r"^[A-Za-z0-9._-]+$")
RESERVED_OWNER_PREFIX = "__memsvc"  # memsvc.core.memories: owners memsvc keeps for itself

# A token reads `msk_<lookup>_<secret>`: the lookup (12 hex digits, public, unique) finds
# the stored hash with one indexed read; the secret is 256 random bits.
TOKEN_PREFIX = "msk"
LOOKUP_BYTES = 6
SECRET_BYTES = 32
_TOKEN = re.compile(r"^msk_([0-9a-f]{12})_([A-Za-z0-9_-]{43,})$")


@dataclass(frozen=True)
class Credential:
    """What a verified token may do. `tenants` None means every apiKeyId (`*`)."""

    id: str
    permissions: frozenset[str]
    tenants: frozenset[str] | None
    characters: bool
    created_at: datetime | None = None
    revoked_at: datetime | None = None

    @property
    def is_admin(self) -> bool:
        return ADMIN in self.permissions

    def allows(self, permission: str) -> bool:
        return self.is_admin or permission in self.permissions

    def covers(self, api_key_id: str) -> bool:
        return self.tenants is None or api_key_id in self.tenants

    def tenant_list(self) -> list[str]:
        return [ALL_TENANTS] if self.tenants is None else sorted(self.tenants)


def admin_credential(credential_id: str) -> Credential:
    """A token of MEMSVC_API_TOKENS: an admin, as every token was before credentials."""
    return Credential(credential_id, frozenset({ADMIN}), None, True)


@dataclass(frozen=True)
class IssuedCredential:
    """A credential just created, with its token: the only time the token is shown."""

    credential: Credential
    token: str


@dataclass(frozen=True)
class TenantScope:
    """The tenants a confined (non-admin) caller may address; None = any apiKeyId."""

    tenants: frozenset[str] | None


tenant_scope: contextvars.ContextVar[TenantScope | None] = contextvars.ContextVar("memsvc_tenant_scope", default=None)


# The verified credential of the calling request, set by the auth interceptor beside
# `tenant_scope`; None when authentication is off (every call is accepted).
caller: contextvars.ContextVar[Credential | None] = contextvars.ContextVar("memsvc_caller", default=None)
# What a caller may do when authentication is off: everything, under no name.
OPEN_CALLER = Credential("", frozenset(PERMISSIONS), None, True)
# A call without any token on a server that requires one, admitted only where the access
# rules let anyone in (asking whether a token is needed): no permission, no tenant.
ANONYMOUS = Credential("", frozenset(), frozenset(), False)


def current_caller() -> Credential | None:
    """The calling request's credential; None when the server takes calls without a token."""
    return caller.get()


def current_scope() -> TenantScope | None:
    """The calling request's confinement; None for an admin (or with authentication off)."""
    return tenant_scope.get()


def confined(flt: MemoryFilter) -> MemoryFilter:
    """A filter naming no apiKeyId, limited to a confined caller's tenants (never all)."""
    scope = current_scope()
    if scope is None or scope.tenants is None or flt.api_key_id is not None:
        return flt
    return replace(flt, owners=scope.tenants)


def retrieval_scope(scope: str) -> str:
    """The retrieval scope a caller gets: reading every tenant ("global") is for admins; a
    confined caller's retrieval stays within its own apiKeyId even when the settings say
    global."""
    return "apiKey" if scope == "global" and current_scope() is not None else scope


def mint_token() -> tuple[str, str, str]:
    """(lookup, secret, token) for a new credential."""
    lookup = secrets.token_hex(LOOKUP_BYTES)
    secret = secrets.token_urlsafe(SECRET_BYTES)
    return lookup, secret, f"{TOKEN_PREFIX}_{lookup}_{secret}"


def parse_token(token: str) -> tuple[str, str] | None:
    """(lookup, secret) of a well-formed credential token, else None."""
    match = _TOKEN.match(token)
    return (match[1], match[2]) if match else None


def new_credential(
    credential_id: str, permissions: Iterable[str], tenants: Iterable[str], characters: bool
) -> Credential:
    """Validate an operator's request (every problem at once) and normalize it: an admin
    addresses every tenant and character memory whatever was asked."""
    v = Violations()
    perms = [p.strip() for p in permissions if p.strip()]
    names = [t.strip() for t in tenants if t.strip()]
    if not credential_id or len(credential_id) > MAX_ID_CHARS or not _ID.match(credential_id):
        v.add("id", f"must be 1-{MAX_ID_CHARS} letters, digits, '.', '-' or '_'")
    if not perms:
        v.add("permissions", f"at least one of {', '.join(PERMISSIONS)}")
    for p in perms:
        if p not in PERMISSIONS:
            v.add("permissions", f"{shorten(p)!r} is not one of {', '.join(PERMISSIONS)}")
    _check_tenants(v, names)
    if not names and not characters and ADMIN not in perms:
        v.add("tenants", f"name at least one apiKeyId (or {ALL_TENANTS!r}), or give character memory access")
    v.raise_if_any()
    if ADMIN in perms:
        return Credential(credential_id, frozenset({ADMIN}), None, True)
    every = ALL_TENANTS in names
    return Credential(credential_id, frozenset(perms), None if every else frozenset(names), bool(characters))


def _check_tenants(v: Violations, names: Sequence[str]) -> None:
    if ALL_TENANTS in names and len(names) > 1:
        v.add("tenants", f"{ALL_TENANTS!r} already means every apiKeyId; list nothing else")
    if len(names) > MAX_TENANTS:
        v.add("tenants", f"at most {MAX_TENANTS}")
    for name in names:
        if len(name) > MAX_TENANT_CHARS:
            v.add("tenants", f"an apiKeyId has at most {MAX_TENANT_CHARS} characters")
        elif name.startswith(RESERVED_OWNER_PREFIX):
            v.add("tenants", f"apiKeyIds starting with {RESERVED_OWNER_PREFIX!r} are reserved")


# Compared against when no row matches, so an unknown lookup costs what a wrong secret does.
_NO_DIGEST = bytes(32)
#: How many verified credentials a process keeps (least recently used out first). Only rows
#: the store holds get in, never a token a caller made up, so this bounds the memory of a
#: process with very many credentials, not of one under a flood of bad tokens.
CACHE_SIZE = 1024


def secret_digest(secret: str) -> bytes:
    """What the store keeps of a secret (memsvc.storage.credentials says why SHA-256)."""
    return hashlib.sha256(secret.encode("utf-8")).digest()


def secret_matches(secret: str, stored: bytes | None) -> bool:
    """Whether `secret` hashes to `stored` (None: no row had the lookup), compared in
    constant time either way, so timing tells nothing about the secret."""
    matched = hmac.compare_digest(secret_digest(secret), _NO_DIGEST if stored is None else stored)
    return matched and stored is not None


@dataclass(frozen=True)
class StoredCredential:
    """A stored row as verification needs it: the secret's digest and what it grants."""

    digest: bytes
    credential: Credential


@dataclass(frozen=True)
class Verdict:
    """What a request's token comes to: whether stored credentials require a token at all
    (any was ever created), and the active credential it proves (None: missing, malformed,
    unknown, wrong secret or revoked, which the caller cannot tell apart)."""

    required: bool
    credential: Credential | None


class CredentialStore(Protocol):
    def insert(self, credential: Credential, lookup: str, secret: str) -> Credential: ...

    def by_lookup(self, lookup: str) -> StoredCredential | None: ...

    def version(self) -> int: ...

    def change_hint(self) -> int | None: ...

    def all(self) -> list[Credential]: ...

    def revoke(self, credential_id: str) -> Credential | None: ...

    def exists(self) -> bool: ...


@dataclass(frozen=True)
class _Seen:
    """The cache's footing: the store's `version` and, read just before it, its change hint
    (while the hint reads the same, nothing was committed since, so the version holds)."""

    hint: int | None
    version: int
    required: bool


class Credentials:
    """The operator's credential management, and token verification for the API.

    Verification keeps the rows it read (lookup → digest and credential, at most
    `cache_size`, least recently used out first) under the store's change counter of the
    credentials, which every create and revoke advances in its own transaction: `check`
    reads the counter (one indexed read) and drops every row when it moved, so a revocation
    by any process holds from the next request in every process sharing the store. Where
    the store offers a change hint that costs no wait (SQLite's data version), `check_now`
    answers from memory while the hint has not moved since the counter was read, which is
    what the event loop calls; otherwise the loop sends `check` to a worker thread. A lookup
    the store does not know is never kept, so made-up tokens cannot fill the cache.
    """

    def __init__(self, store: CredentialStore, cache_size: int = CACHE_SIZE):
        self._store = store
        self._cache_size = cache_size
        self._cache: OrderedDict[str, StoredCredential] = OrderedDict()
        self._seen: _Seen | None = None
        self._lock = threading.Lock()

    def create(
        self, credential_id: str, permissions: Iterable[str], tenants: Iterable[str], characters: bool
    ) -> IssuedCredential:
        credential = new_credential(credential_id, permissions, tenants, characters)
        lookup, secret, token = mint_token()
        return IssuedCredential(self._store.insert(credential, lookup, secret), token)

    def list(self) -> list[Credential]:
        return self._store.all()

    def revoke(self, credential_id: str) -> Credential:
        revoked = self._store.revoke(credential_id)
        if revoked is None:
            raise NotFoundError(f"credential {shorten(credential_id)!r} not found")
        return revoked

    def check_now(self, token: str | None) -> Verdict | None:
        """The verdict on `token` (None: no token given) from memory, without waiting on
        the store; None when only `check` can tell (something was committed since the
        cache's counter was read, the store has no such hint, or the lookup is not cached)."""
        hint = self._store.change_hint()
        with self._lock:
            seen = self._seen
            if hint is None or seen is None or seen.hint != hint:
                return None
            found = self._cached(token, seen)
        return found if isinstance(found, Verdict) else None

    def check(self, token: str | None) -> Verdict:
        """The verdict on `token`, reading the store as needed (blocking: on a worker thread)."""
        hint = self._store.change_hint()  # before the version: see _Seen
        version = self._store.version()
        seen = self._seen
        if seen is None or seen.version != version:
            # Once a credential exists it stays (rows are never deleted), so a later read is
            # as good as one at `version`.
            seen = _Seen(hint, version, (seen is not None and seen.required) or self._store.exists())
        else:
            seen = replace(seen, hint=hint)
        with self._lock:
            if self._seen is None or self._seen.version != version:
                self._cache.clear()
            self._seen = seen
            found = self._cached(token, seen)
        if isinstance(found, Verdict):
            return found
        lookup, secret = found
        return self._read(lookup, secret, seen)

    def _cached(self, token: str | None, seen: _Seen) -> Verdict | tuple[str, str]:
        """Under the lock, `seen` current: the verdict when memory has it, else the token's
        (lookup, secret) for the store to answer."""
        parts = parse_token(token) if token is not None and seen.required else None
        if parts is None:  # no token, not one of ours, or no credential exists
            return Verdict(seen.required, None)
        row = self._cache.get(parts[0])
        if row is None:
            return parts
        self._cache.move_to_end(parts[0])
        return _verdict(row, parts[1])

    def _read(self, lookup: str, secret: str, seen: _Seen) -> Verdict:
        """The verdict from the credential's row, kept if the store has it and the counter
        has not moved meanwhile (the row was read after the counter, so it is no older)."""
        row = self._store.by_lookup(lookup)
        if row is None:
            secret_matches(secret, None)  # costs what a wrong secret costs
            return Verdict(True, None)
        with self._lock:
            if self._seen is not None and self._seen.version == seen.version and self._cache_size > 0:
                self._cache[lookup] = row
                self._cache.move_to_end(lookup)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return _verdict(row, secret)

    def authenticate(self, token: str) -> Credential | None:
        """The active credential whose token this is, else None (malformed, unknown,
        wrong secret or revoked: the caller cannot tell which)."""
        return self.check(token).credential

    def required(self) -> bool:
        """Whether any credential was ever created. Revoked ones count: revoking the last
        token must not open the server."""
        return self.check(None).required

    def cached(self) -> int:
        """How many verified credentials this process keeps (metrics, tests)."""
        with self._lock:
            return len(self._cache)


def _verdict(row: StoredCredential, secret: str) -> Verdict:
    """A present row's verdict on a secret: constant-time compare, then not revoked."""
    matched = secret_matches(secret, row.digest)
    return Verdict(True, row.credential if matched and row.credential.revoked_at is None else None)
