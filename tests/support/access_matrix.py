"""The access matrix: every RPC of every memsvc service called with each kind of caller,
through gRPC or through Envoy, against what the access policy says the outcome must be.

The policy is restated here independently of `memsvc.api.access` (each RPC's kind below),
so a wrong rule in the table fails the matrix instead of agreeing with itself.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.api import annotations_pb2
from google.protobuf import json_format, struct_pb2
from google.protobuf.descriptor import MethodDescriptor

from memsvc.v1 import credentials_pb2, engine_pb2, memory_pb2, settings_pb2

MODULES = (memory_pb2, engine_pb2, settings_pb2, credentials_pb2)

# What each RPC is, in the policy's words. tenant-*: names an apiKeyId; byid-*: names a
# memory id; open-read: touches no tenant; char-*: character memory; char-owner-read: one
# character's chat, which also needs its owner `character:<name>` among the token's tenants;
# admin: admin only; self: the caller asking about itself, which anyone may do (a token
# sent must be valid).
KINDS = {
    "MemoryService/ListMemories": "tenant-read",
    "MemoryService/CreateMemory": "tenant-write",
    "MemoryService/CreateMemories": "tenant-write",
    "MemoryService/ClearMemories": "tenant-write",
    "MemoryService/CheckHealth": "open-read",
    "MemoryService/GetMemory": "byid-read",
    "MemoryService/UpdateMemory": "byid-write",
    "MemoryService/DeleteMemory": "byid-write",
    "MemoryService/GetMemoryHistory": "byid-read",
    "MemoryService/WatchMemories": "tenant-read",
    "MemoryService/ListRecentFiles": "char-read",
    "MemoryService/GetRecentFile": "char-owner-read",
    "MemoryService/SaveRecentFile": "char-write",
    "MemoryService/AppendRecentMessages": "char-write",
    "MemoryService/RenameCharacter": "admin",
    "MemoryService/ScanLegacy": "admin",
    "MemoryService/PurgeLegacy": "admin",
    "EngineService/Retrieve": "tenant-read",
    "EngineService/Inject": "tenant-read",
    "EngineService/Extract": "tenant-write",
    "EngineService/RetrievePreview": "tenant-read",
    "EngineService/ListEmbeddingProviders": "open-read",
    "EngineService/GetEngineStatus": "admin",
    "EngineService/Summarize": "tenant-write",
    "EngineService/Reindex": "admin",
    "SettingsService/GetMemorySettings": "admin",
    "SettingsService/UpdateMemorySettings": "admin",
    "SettingsService/GetQdrantSettings": "admin",
    "SettingsService/UpdateQdrantSettings": "admin",
    "SettingsService/CheckQdrantHealth": "admin",
    "SettingsService/SearchQdrant": "admin",
    "SettingsService/CleanupQdrant": "admin",
    "SettingsService/ListQdrantEmbeddingModels": "admin",
    "SettingsService/GetReviewConfig": "char-read",
    "SettingsService/SetReviewConfig": "admin",
    "SettingsService/GetPowerfulMemoryConfig": "char-read",
    "SettingsService/SetPowerfulMemoryConfig": "admin",
    "CredentialService/CreateCredential": "admin",
    "CredentialService/ListCredentials": "admin",
    "CredentialService/RevokeCredential": "admin",
    "CredentialService/GetCaller": "self",
}

# Refusals first: the admin case last, since what an admin call starts (a reindex) may
# still run while later calls are made.
CASES = ("no-token", "wrong-token", "revoked-token", "tenant-A-on-A", "tenant-A-on-B", "read-only-on-A", "admin")
ALLOWED = "allowed"  # anything but UNAUTHENTICATED / PERMISSION_DENIED
UNAUTH, DENIED, NOT_FOUND, OK = "UNAUTHENTICATED", "PERMISSION_DENIED", "NOT_FOUND", "OK"
# Memory operations the tenant token can complete with the sample requests below.
SUCCEEDS = {"tenant-read", "tenant-write", "byid-read", "byid-write", "open-read"}


def expected(kind: str, case: str) -> str:
    """The outcome the policy demands (a status name, or ALLOWED)."""
    if kind == "self":
        return UNAUTH if case in ("wrong-token", "revoked-token") else OK
    if case in ("no-token", "wrong-token", "revoked-token"):
        return UNAUTH
    if case == "admin":
        return ALLOWED
    if kind == "admin":
        return DENIED
    if case == "read-only-on-A":  # read:memory, tenant A (not character:Matrix), character access
        return DENIED if kind.endswith("-write") or kind == "char-owner-read" else ALLOWED
    if kind.startswith("char-"):  # tenant A's token has no character access
        return DENIED
    if case == "tenant-A-on-B":
        return {"tenant": DENIED, "byid": NOT_FOUND}.get(kind.split("-")[0], OK)
    return OK if kind in SUCCEEDS else ALLOWED


def methods() -> list[tuple[str, MethodDescriptor]]:
    """("/memsvc.v1.Service/Method", descriptor) of every RPC of every memsvc service."""
    return [
        (f"/{service.full_name}/{method.name}", method)
        for module in MODULES
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    ]


def short(path: str) -> str:
    return path.split(".v1.", 1)[1]


@dataclass
class World:
    """Tokens for every case and sample requests, over one running server."""

    app: Any
    admin_stubs: Any
    tokens: dict[str, str | None] = field(default_factory=dict)
    _serial: Any = field(default_factory=itertools.count)

    @classmethod
    def build(cls, handle) -> World:
        creds = handle.app.credentials
        admin = creds.create("matrix-admin", ["admin"], [], False).token
        tenant = creds.create("matrix-a", ["read:memory", "write:memory"], ["A"], False).token
        reader = creds.create("matrix-read", ["read:memory"], ["A"], True).token
        revoked = creds.create("matrix-revoked", ["read:memory", "write:memory"], ["A"], True).token
        creds.revoke("matrix-revoked")
        lookup = tenant.split("_")[1]
        world = cls(handle.app, handle.stubs(admin))
        world.tokens = {
            "no-token": None,
            "wrong-token": f"msk_{lookup}_{'w' * 43}",
            "revoked-token": revoked,
            "tenant-A-on-A": tenant,
            "tenant-A-on-B": tenant,
            "read-only-on-A": reader,
            "admin": admin,
        }
        world.admin_stubs.settings.UpdateMemorySettings(
            settings_pb2.UpdateMemorySettingsRequest(settings=_struct({"enabled": True})), timeout=10
        )
        return world

    def memory_of(self, tenant: str) -> str:
        """A fresh memory of `tenant` (by-id calls may delete theirs)."""
        return self.admin_stubs.memory.CreateMemory(
            memory_pb2.CreateMemoryRequest(
                api_key_id=tenant, content=f"matrix memory {next(self._serial)} of {tenant}: I like green tea"
            ),
            timeout=10,
        ).id

    def request(self, name: str, case: str) -> Any:
        """The sample request of RPC `name` aimed at the case's tenant."""
        tenant = "B" if case == "tenant-A-on-B" else "A"
        by_id = lambda cls: cls(id=self.memory_of(tenant))  # noqa: E731
        samples: dict[str, Callable[[], Any]] = {
            "ListMemories": lambda: memory_pb2.ListMemoriesRequest(api_key_id=tenant),
            "CreateMemory": lambda: memory_pb2.CreateMemoryRequest(api_key_id=tenant, content="matrix create"),
            "CreateMemories": lambda: memory_pb2.CreateMemoriesRequest(
                memories=[memory_pb2.CreateMemoryRequest(api_key_id=tenant, content="matrix batch create")]
            ),
            "ClearMemories": lambda: memory_pb2.ClearMemoriesRequest(api_key_id=tenant, type="episodic"),
            "GetMemory": lambda: by_id(memory_pb2.GetMemoryRequest),
            "UpdateMemory": lambda: memory_pb2.UpdateMemoryRequest(id=self.memory_of(tenant), content="changed"),
            "DeleteMemory": lambda: by_id(memory_pb2.DeleteMemoryRequest),
            "GetMemoryHistory": lambda: by_id(memory_pb2.GetMemoryHistoryRequest),
            "WatchMemories": lambda: memory_pb2.WatchMemoriesRequest(api_key_id=tenant, stop_when_caught_up=True),
            "GetRecentFile": lambda: memory_pb2.GetRecentFileRequest(filename="recent_Matrix.json"),
            "SaveRecentFile": lambda: memory_pb2.SaveRecentFileRequest(
                filename="recent_Matrix.json", chat=[memory_pb2.ChatItem(role="user", text="hello")]
            ),
            "AppendRecentMessages": lambda: memory_pb2.AppendRecentMessagesRequest(
                character="Matrix", messages=[memory_pb2.ChatItem(role="user", text="hello")]
            ),
            "RenameCharacter": lambda: memory_pb2.RenameCharacterRequest(old_name="Nobody", new_name="Somebody"),
            "Retrieve": lambda: engine_pb2.RetrieveRequest(api_key_id=tenant, query="green tea"),
            "Inject": lambda: engine_pb2.InjectRequest(
                api_key_id=tenant,
                provider="openai",
                model="gpt-4o",
                request=_struct({"messages": [{"role": "user", "content": "what tea do I like?"}]}),
            ),
            "Extract": lambda: engine_pb2.ExtractRequest(
                api_key_id=tenant, text="My name is Alex. I prefer oolong.", wait=True
            ),
            "RetrievePreview": lambda: engine_pb2.RetrievePreviewRequest(api_key_id=tenant, query="green tea"),
            "Summarize": lambda: engine_pb2.SummarizeRequest(api_key_id=tenant, dry_run=True),
            "Reindex": lambda: engine_pb2.ReindexRequest(limit=1),
            "UpdateMemorySettings": lambda: settings_pb2.UpdateMemorySettingsRequest(
                settings=_struct({"enabled": True})
            ),
            "SearchQdrant": lambda: settings_pb2.SearchQdrantRequest(query="tea", api_key_id=tenant),
            "SetReviewConfig": lambda: settings_pb2.SetToggleRequest(enabled=struct_pb2.Value(bool_value=False)),
            "SetPowerfulMemoryConfig": lambda: settings_pb2.SetToggleRequest(
                enabled=struct_pb2.Value(bool_value=False)
            ),
            "CreateCredential": lambda: credentials_pb2.CreateCredentialRequest(
                id=f"made-{next(self._serial)}", permissions=["read:memory"], tenants=[tenant]
            ),
            "RevokeCredential": lambda: credentials_pb2.RevokeCredentialRequest(id="nobody"),
        }
        return samples[name]() if name in samples else None


def _struct(value: dict) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(value)
    return out


def request_for(world: World, path: str, method: MethodDescriptor, case: str) -> Any:
    sample = world.request(method.name, case)
    if sample is not None:
        return sample
    module = next(m for m in MODULES if m.DESCRIPTOR.services_by_name.get(method.containing_service.name))
    return getattr(module, method.input_type.name)()


def snapshot(app: Any) -> str:
    """A digest of everything a call could change: memories (their data, not the access
    counters retrieval bumps), settings, credentials, pending appends, the character
    files and the toggles' config files."""
    parts = []
    with app.database.read() as conn:
        for sql in (
            "SELECT id, api_key_id, session_id, type, key, content, metadata, created_at, updated_at,"
            " expires_at FROM memories ORDER BY id",
            "SELECT key, value FROM settings ORDER BY key",
            "SELECT id, revoked_at FROM credentials ORDER BY id",
            "SELECT id, character, text FROM recent_pending ORDER BY id",
        ):
            parts.append(repr(conn.execute(sql).fetchall()))
    data_dir = Path(app.config.data_dir)
    for folder in (app.config.runtime_memory_dir, app.config.config_dir):
        for root, _, files in sorted(os.walk(folder)):
            for path in sorted(Path(root) / name for name in files):
                if path.is_file():
                    parts.append(f"{path.relative_to(data_dir)}:{hashlib.sha256(path.read_bytes()).hexdigest()}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


# ---- calling ------------------------------------------------------------------------------


def grpc_call(channel: grpc.Channel, path: str, method: MethodDescriptor, request: Any, token: str | None) -> str:
    """The status name a gRPC call ends with."""
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    kwargs = dict(request_serializer=lambda m: m.SerializeToString(), response_deserializer=lambda b: b)
    try:
        if method.server_streaming:
            list(channel.unary_stream(path, **kwargs)(request, metadata=metadata, timeout=30))
        else:
            channel.unary_unary(path, **kwargs)(request, metadata=metadata, timeout=30)
    except grpc.RpcError as err:
        return err.code().name
    return OK


HTTP_STATUS = {200: OK, 401: UNAUTH, 403: DENIED, 404: NOT_FOUND}


def rest_call(rest: Any, method: MethodDescriptor, request: Any, token: str | None) -> str:
    """The same call through Envoy, transcoded by the RPC's google.api.http rule: path
    variables from their fields, the body (`*` or one field) as JSON, the rest of a GET or
    DELETE as query parameters. Returns the status name the HTTP status stands for."""
    rule = method.GetOptions().Extensions[annotations_pb2.http]
    verb = rule.WhichOneof("pattern")
    template: str = getattr(rule, verb)
    fields = json_format.MessageToDict(request, preserving_proto_field_name=True)
    in_path = [seg[1:-1] for seg in template.split("/") if seg.startswith("{")]
    for name in in_path:
        template = template.replace("{" + name + "}", str(fields.pop(name, "")))
    body = None
    if rule.body == "*":  # every field the path does not carry (a field in two places is refused)
        path_json = {request.DESCRIPTOR.fields_by_name[name].json_name for name in in_path}
        body = {k: v for k, v in json_format.MessageToDict(request).items() if k not in path_json}
    elif rule.body:
        body = fields.pop(rule.body, {})
    elif fields:
        template += "?" + "&".join(f"{k}={v}" for k, v in fields.items())
    client = type(rest)(rest.base, token)
    status, payload = client.call(verb.upper(), template, body)
    name = HTTP_STATUS.get(status, f"HTTP {status}")
    if name in (UNAUTH, DENIED):
        assert isinstance(payload, dict) and payload.get("code") in (16, 7), payload
    return name


def run_matrix(world: World, call: Callable[[str, MethodDescriptor, Any, str | None], str]) -> list[str]:
    """Every RPC × every case; returns the mismatches (empty when the policy holds)."""
    problems = []
    for case in CASES:
        for path, method in methods():
            want = expected(KINDS[short(path)], case)
            request = request_for(world, path, method, case)
            before = snapshot(world.app) if want not in (OK, ALLOWED) else None
            got = call(path, method, request, world.tokens[case])
            if (want == ALLOWED and got in (UNAUTH, DENIED)) or (want != ALLOWED and got != want):
                problems.append(f"{case} {short(path)}: want {want}, got {got}")
            if before is not None and snapshot(world.app) != before:
                problems.append(f"{case} {short(path)}: refused ({got}) but the stored state changed")
    return problems


def describe(problems: list[str]) -> str:
    return json.dumps(problems, indent=1)
