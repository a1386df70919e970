"""The one access rule table: for every RPC, the permission it needs and how its tenant is
found. The auth interceptor consults it before the servicer runs; nothing else checks
tenants (the core only honours the confinement passed down in `tenant_scope`).

How a tenant is found:

- `NO_TENANT`: the call touches no tenant's memories (health round trip, provider list).
- `TenantField(name, when_empty)`: the request names its apiKeyId in `name`. A name outside
  the token's tenants is PERMISSION_DENIED. When the field is empty: `CORE` — the core
  refuses or skips the call itself (nothing to confine); `CONFINE` — a listing, confined to
  the token's tenants; `ADMIN` — empty means every tenant, which needs `admin`.
- `TenantsOf(items, name)`: a batch; every item of the repeated field `items` names its
  apiKeyId in `name`, and each named tenant must be one the token covers, or the WHOLE call
  is PERMISSION_DENIED (nothing of it runs). An item without one is the core's to refuse.
- `MemoryById(name)`: the call names a memory id; a memory of another tenant is NOT_FOUND,
  exactly as a missing id, so existence is not revealed.
- `CharacterOwner(name, filename)`: the call reads or writes a character's recent history
  (field `name` holds the character, or its `recent_<name>.json` file name when
  `filename`), whose chat turns become memories of the owner `character:<name>`
  (reflections promote them): the token must cover that owner as it would an apiKeyId, or
  the call is PERMISSION_DENIED. The refusal depends on the name and the token alone, never
  on the files, so a read of a character the token does not cover is refused alike whether
  or not it has a history (no existence oracle); NOT_FOUND is only ever told to a caller
  who may read that character. A name that does not parse is the core's to refuse; an
  append that follows a rename to another character is checked again by the core against
  the character it lands on, and ListRecentFiles (no character named) is confined by the
  core to the characters the token covers (`memsvc.characters.common.may_address`).
- `characters=True`: character memory, which needs the credential's character access.
- permission `ANYONE`: any caller, even one without a token (then as the credential-less
  `ANONYMOUS`): the caller asking about itself, which tells a tokenless caller only that a
  token is needed. A token that is sent must still be valid.
- `widens`: request fields that reach every tenant (`scope: global`, `allTenants`): set,
  they need `admin`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from memsvc.characters.common import owner_id
from memsvc.characters.names import character_from_filename
from memsvc.core.credentials import ADMIN, READ, WRITE, Credential, TenantScope
from memsvc.core.memories import memory_not_found
from memsvc.kernel.errors import PermissionDeniedError, ValidationError, shorten

CORE, CONFINE, ADMIN_ONLY = "core", "confine", "admin"
# Not a permission a credential holds: the rule of a call anyone may make.
ANYONE = "anyone"


@dataclass(frozen=True)
class NoTenant:
    pass


@dataclass(frozen=True)
class TenantField:
    name: str = "api_key_id"
    when_empty: str = CORE


@dataclass(frozen=True)
class TenantsOf:
    items: str
    name: str = "api_key_id"


@dataclass(frozen=True)
class MemoryById:
    name: str = "id"


@dataclass(frozen=True)
class CharacterOwner:
    name: str = "character"
    filename: bool = False


TenantSource = NoTenant | TenantField | TenantsOf | MemoryById | CharacterOwner
NO_TENANT = NoTenant()
OWNER = TenantField()


@dataclass(frozen=True)
class Rule:
    permission: str
    tenant: TenantSource = NO_TENANT
    characters: bool = False
    #: (field, value) pairs that widen the call to every tenant; value True = any truthy value.
    widens: tuple[tuple[str, Any], ...] = field(default_factory=tuple)


def _admin() -> Rule:
    return Rule(ADMIN)


_M, _E, _S, _C = (
    "/memsvc.v1.MemoryService/",
    "/memsvc.v1.EngineService/",
    "/memsvc.v1.SettingsService/",
    "/memsvc.v1.CredentialService/",
)

RULES: dict[str, Rule] = {
    _M + "ListMemories": Rule(READ, TenantField(when_empty=CONFINE)),
    _M + "CreateMemory": Rule(WRITE, OWNER),
    _M + "CreateMemories": Rule(WRITE, TenantsOf("memories")),
    _M + "ClearMemories": Rule(WRITE, OWNER),
    _M + "CheckHealth": Rule(READ),
    _M + "GetMemory": Rule(READ, MemoryById()),
    _M + "UpdateMemory": Rule(WRITE, MemoryById()),
    _M + "DeleteMemory": Rule(WRITE, MemoryById()),
    _M + "GetMemoryHistory": Rule(READ, MemoryById()),
    _M + "WatchMemories": Rule(READ, TenantField(when_empty=CONFINE)),
    _M + "ListRecentFiles": Rule(READ, characters=True),
    _M + "GetRecentFile": Rule(READ, CharacterOwner("filename", filename=True), characters=True),
    _M + "SaveRecentFile": Rule(WRITE, CharacterOwner("filename", filename=True), characters=True),
    _M + "AppendRecentMessages": Rule(WRITE, CharacterOwner("character"), characters=True),
    _M + "RenameCharacter": _admin(),
    _M + "ScanLegacy": _admin(),
    _M + "PurgeLegacy": _admin(),
    _E + "Retrieve": Rule(READ, TenantField(when_empty=ADMIN_ONLY), widens=(("scope", "global"),)),
    _E + "Inject": Rule(READ, OWNER),
    _E + "Extract": Rule(WRITE, OWNER),
    _E + "RetrievePreview": Rule(READ, TenantField(when_empty=ADMIN_ONLY)),
    _E + "ListEmbeddingProviders": Rule(READ),
    _E + "GetEngineStatus": _admin(),
    _E + "Summarize": Rule(WRITE, OWNER, widens=(("all_tenants", True),)),
    _E + "Reindex": _admin(),
    _S + "GetMemorySettings": _admin(),
    _S + "UpdateMemorySettings": _admin(),
    _S + "GetQdrantSettings": _admin(),
    _S + "UpdateQdrantSettings": _admin(),
    _S + "CheckQdrantHealth": _admin(),
    _S + "SearchQdrant": _admin(),
    _S + "CleanupQdrant": _admin(),
    _S + "ListQdrantEmbeddingModels": _admin(),
    _S + "GetReviewConfig": Rule(READ, characters=True),
    _S + "SetReviewConfig": _admin(),
    _S + "GetPowerfulMemoryConfig": Rule(READ, characters=True),
    _S + "SetPowerfulMemoryConfig": _admin(),
    _C + "CreateCredential": _admin(),
    _C + "ListCredentials": _admin(),
    _C + "RevokeCredential": _admin(),
    _C + "GetCaller": Rule(ANYONE),
}


@dataclass(frozen=True)
class Grant:
    """An authorized call: the confinement to pass down, what to audit, and for by-id
    calls the memory whose owner must still be checked (`check_owner`)."""

    scope: TenantScope | None
    tenant: str
    audited: bool
    memory_id: str | None = None


def authorize(method: str, credential: Credential, request: Any) -> Grant:
    """Raises PermissionDeniedError, or returns the grant (a by-id call still needs
    `check_owner` once the memory's owner is known)."""
    rule = RULES.get(method)
    if rule is None:  # fail closed; a test keeps every RPC in the table
        raise PermissionDeniedError("this method has no access rule")
    if rule.permission != ANYONE and not credential.allows(rule.permission):
        raise PermissionDeniedError(f"credential {credential.id!r} lacks the {rule.permission} permission")
    if rule.characters and not credential.characters:
        raise PermissionDeniedError(f"credential {credential.id!r} has no access to character memory")
    scope = None if credential.is_admin else TenantScope(credential.tenants)
    if not isinstance(request, Message):
        # Bytes that did not decode: no field to check; the innermost behaviour refuses the
        # call as INVALID_ARGUMENT before anything runs.
        return Grant(scope, "", rule.permission == ADMIN)
    widened = [name for name, value in rule.widens if _is_set(getattr(request, name), value)]
    if widened and not credential.is_admin:
        raise PermissionDeniedError(f"{widened[0]} reaches every tenant and needs the admin permission")
    audited = rule.permission == ADMIN or bool(widened)
    return _tenant_grant(rule.tenant, credential, request, scope, audited)


def _tenant_grant(
    source: TenantSource, credential: Credential, request: Any, scope: TenantScope | None, audited: bool
) -> Grant:
    if isinstance(source, MemoryById):
        return Grant(scope, "", audited, memory_id=getattr(request, source.name))
    if isinstance(source, TenantsOf):
        tenants = _item_tenants(source, request)
        for tenant in tenants:
            _check_covers(credential, tenant)
        return Grant(scope, shorten(",".join(tenants), 256), audited)  # the audit line names them
    if isinstance(source, CharacterOwner):
        owner = _character_owner(source, request)
        if owner:
            _check_covers(credential, owner)
        return Grant(scope, owner, audited)
    if not isinstance(source, TenantField):
        return Grant(scope, "", audited)
    tenant = getattr(request, source.name)
    if tenant:
        _check_covers(credential, tenant)
        return Grant(scope, tenant, audited)
    if source.when_empty == ADMIN_ONLY and not credential.is_admin:
        raise PermissionDeniedError("without an apiKeyId this reaches every tenant and needs the admin permission")
    return Grant(scope, "", audited)


def _check_covers(credential: Credential, tenant: str) -> None:
    if not credential.covers(tenant):
        raise PermissionDeniedError(f"credential {credential.id!r} may not address apiKeyId {shorten(tenant)!r}")


def _item_tenants(source: TenantsOf, request: Any) -> list[str]:
    """The distinct non-empty apiKeyIds a batch's items name, in first-seen order."""
    return list(dict.fromkeys(t for t in (getattr(item, source.name) for item in getattr(request, source.items)) if t))


def _character_owner(source: CharacterOwner, request: Any) -> str:
    """`character:<name>` of the character a request reads or writes, "" when the name does not
    parse (the core refuses that request as INVALID_ARGUMENT)."""
    raw = str(getattr(request, source.name) or "")
    if source.filename:
        try:
            raw = character_from_filename(raw)
        except ValidationError:
            return ""
    name = raw if source.filename else raw.strip()  # an append trims the name it is given
    return owner_id(name) if name else ""


def admits_anonymous(method: str) -> bool:
    """Whether a call that carries no token at all may still run (as ANONYMOUS)."""
    rule = RULES.get(method)
    return rule is not None and rule.permission == ANYONE


def check_owner(credential: Credential, memory_id: str, owner: str | None) -> None:
    """A memory of a tenant the credential does not cover is reported exactly as a
    missing one. For a credential confined to some tenants a missing id is refused here
    too, before the request is validated: otherwise a patch the servicer would refuse
    (INVALID_ARGUMENT for a missing id, NOT_FOUND here for another tenant's) would tell
    which ids exist."""
    if owner is None and credential.tenants is not None:
        raise memory_not_found(memory_id)
    if owner is not None and not credential.covers(owner):
        raise memory_not_found(memory_id)


def _is_set(actual: Any, wanted: Any) -> bool:
    return bool(actual) if wanted is True else actual == wanted


def requested_tenant(method: str, request: Any) -> str:
    """The apiKeyId a request names (for the audit line of a refusal), "" if none."""
    rule = RULES.get(method)
    if rule is None or not isinstance(request, Message):
        return ""
    if isinstance(rule.tenant, TenantsOf):
        return shorten(",".join(_item_tenants(rule.tenant, request)), 256)
    if isinstance(rule.tenant, CharacterOwner):
        return shorten(_character_owner(rule.tenant, request), 256)
    if not isinstance(rule.tenant, TenantField):
        return ""
    return str(getattr(request, rule.tenant.name, "") or "")
