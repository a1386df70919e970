"""Stored credentials through the real gRPC server: tenants, permissions, character access,
by-id confinement, revocation, auth turning on with the first credential, the audit log."""

from __future__ import annotations

import json
import logging

import grpc
import pytest
from conftest import make_config, start_server
from support.rpc_errors import error_info

from memsvc.logs import JsonFormatter
from memsvc.v1 import engine_pb2, memory_pb2, settings_pb2

ADMIN_ENV = "env-admin-token"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    handle = start_server(make_config(tmp_path_factory.mktemp("creds"), api_tokens=(ADMIN_ENV,)))
    yield handle
    handle.stop()


def _token(server, name, permissions, tenants=(), characters=False) -> str:
    return server.app.credentials.create(name, permissions, tenants, characters).token


def _code(fn, request) -> grpc.StatusCode:
    try:
        fn(request, timeout=10)
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def _create(stubs, owner: str, content: str) -> str:
    return stubs.memory.CreateMemory(memory_pb2.CreateMemoryRequest(api_key_id=owner, content=content), timeout=10).id


def test_a_tenant_token_reads_and_writes_only_its_tenants(secured):
    admin = secured.stubs(ADMIN_ENV)
    b_id = _create(admin, "t1-B", "B's secret plan")
    a = secured.stubs(_token(secured, "t1-a", ["read:memory", "write:memory"], ["t1-A"]))
    a_id = _create(a, "t1-A", "A's note")
    assert a.memory.GetMemory(memory_pb2.GetMemoryRequest(id=a_id), timeout=10).content == "A's note"
    for call, request in [
        (a.memory.CreateMemory, memory_pb2.CreateMemoryRequest(api_key_id="t1-B", content="x")),
        (a.memory.ListMemories, memory_pb2.ListMemoriesRequest(api_key_id="t1-B")),
        (a.memory.ClearMemories, memory_pb2.ClearMemoriesRequest(api_key_id="t1-B")),
        (a.engine.Retrieve, engine_pb2.RetrieveRequest(api_key_id="t1-B", query="plan")),
    ]:
        assert _code(call, request) is grpc.StatusCode.PERMISSION_DENIED
    listing = admin.memory.ListMemories(memory_pb2.ListMemoriesRequest(api_key_id="t1-B"), timeout=10)
    assert [m.id for m in listing.data] == [b_id]


def test_another_tenants_memory_is_not_found_exactly_like_a_missing_one(secured):
    admin = secured.stubs(ADMIN_ENV)
    b_id = _create(admin, "t2-B", "B only")
    a = secured.stubs(_token(secured, "t2-a", ["read:memory", "write:memory"], ["t2-A"]))
    for rpc, request_for in [
        (a.memory.GetMemory, lambda i: memory_pb2.GetMemoryRequest(id=i)),
        (a.memory.UpdateMemory, lambda i: memory_pb2.UpdateMemoryRequest(id=i, content="stolen")),
        (a.memory.DeleteMemory, lambda i: memory_pb2.DeleteMemoryRequest(id=i)),
    ]:
        with pytest.raises(grpc.RpcError) as theirs:
            rpc(request_for(b_id), timeout=10)
        with pytest.raises(grpc.RpcError) as missing:
            rpc(request_for("no-such-id"), timeout=10)
        assert theirs.value.code() is missing.value.code() is grpc.StatusCode.NOT_FOUND
        assert theirs.value.details() == missing.value.details().replace("no-such-id", b_id)
        assert error_info(theirs.value).reason == error_info(missing.value).reason == "NOT_FOUND"
    assert admin.memory.GetMemory(memory_pb2.GetMemoryRequest(id=b_id), timeout=10).content == "B only"


def test_a_listing_without_api_key_id_is_confined_to_the_tokens_tenants(secured):
    admin = secured.stubs(ADMIN_ENV)
    ids = {owner: _create(admin, owner, f"note of {owner}") for owner in ("t3-A", "t3-B", "t3-C")}
    ab = secured.stubs(_token(secured, "t3-ab", ["read:memory"], ["t3-A", "t3-B"]))
    listing = ab.memory.ListMemories(memory_pb2.ListMemoriesRequest(limit=200), timeout=10)
    assert {m.api_key_id for m in listing.data} == {"t3-A", "t3-B"}
    assert ids["t3-C"] not in {m.id for m in listing.data}
    assert listing.total == 2
    everything = admin.memory.ListMemories(memory_pb2.ListMemoriesRequest(limit=200), timeout=10)
    assert {"t3-A", "t3-B", "t3-C"} <= {m.api_key_id for m in everything.data}


def test_global_scope_and_empty_owner_searches_need_admin(secured):
    admin = secured.stubs(ADMIN_ENV)
    _create(admin, "t4-B", "the password is swordfish")
    star = secured.stubs(_token(secured, "t4-star", ["read:memory", "write:memory"], ["*"]))
    assert (
        _code(star.engine.Retrieve, engine_pb2.RetrieveRequest(api_key_id="t4-A", query="password", scope="global"))
        is grpc.StatusCode.PERMISSION_DENIED
    )
    assert (
        _code(star.engine.RetrievePreview, engine_pb2.RetrievePreviewRequest(query="password"))
        is grpc.StatusCode.PERMISSION_DENIED
    )
    assert (
        _code(star.engine.Summarize, engine_pb2.SummarizeRequest(all_tenants=True, dry_run=True))
        is grpc.StatusCode.PERMISSION_DENIED
    )
    admin.settings.UpdateMemorySettings(
        settings_pb2.UpdateMemorySettingsRequest(settings={"enabled": True, "scope": "global"}), timeout=10
    )
    try:
        # The settings say global; a non-admin still reads only the apiKeyId it names.
        found = star.engine.Retrieve(engine_pb2.RetrieveRequest(api_key_id="t4-A", query="password"), timeout=10)
        assert not found.memories
        preview = star.engine.RetrievePreview(
            engine_pb2.RetrievePreviewRequest(api_key_id="t4-A", query="password"), timeout=10
        )
        assert not preview.memories
        everyone = admin.engine.Retrieve(engine_pb2.RetrieveRequest(api_key_id="t4-A", query="password"), timeout=10)
        assert [m.content for m in everyone.memories] == ["the password is swordfish"]
    finally:
        admin.settings.UpdateMemorySettings(
            settings_pb2.UpdateMemorySettingsRequest(settings={"scope": "apiKey"}), timeout=10
        )


def test_permissions_and_character_access(secured):
    reader = secured.stubs(_token(secured, "t5-read", ["read:memory"], ["t5-A"]))
    assert _code(reader.memory.ListMemories, memory_pb2.ListMemoriesRequest(api_key_id="t5-A")) is grpc.StatusCode.OK
    assert (
        _code(reader.memory.CreateMemory, memory_pb2.CreateMemoryRequest(api_key_id="t5-A", content="x"))
        is grpc.StatusCode.PERMISSION_DENIED
    )
    assert (
        _code(reader.memory.ListRecentFiles, memory_pb2.ListRecentFilesRequest()) is grpc.StatusCode.PERMISSION_DENIED
    )
    assert (
        _code(reader.settings.GetMemorySettings, settings_pb2.GetMemorySettingsRequest())
        is grpc.StatusCode.PERMISSION_DENIED
    )
    chars = secured.stubs(_token(secured, "t5-chars", ["read:memory"], characters=True))
    assert _code(chars.memory.ListRecentFiles, memory_pb2.ListRecentFilesRequest()) is grpc.StatusCode.OK
    assert (
        _code(chars.memory.ListMemories, memory_pb2.ListMemoriesRequest(api_key_id="t5-A"))
        is grpc.StatusCode.PERMISSION_DENIED
    )
    admin = secured.stubs(_token(secured, "t5-admin", ["admin"]))
    assert _code(admin.settings.GetMemorySettings, settings_pb2.GetMemorySettingsRequest()) is grpc.StatusCode.OK
    assert _code(admin.memory.ListRecentFiles, memory_pb2.ListRecentFilesRequest()) is grpc.StatusCode.OK


def test_revocation_holds_from_the_next_request(secured):
    token = _token(secured, "t6-a", ["read:memory"], ["t6-A"])
    stubs = secured.stubs(token)
    request = memory_pb2.ListMemoriesRequest(api_key_id="t6-A")
    assert _code(stubs.memory.ListMemories, request) is grpc.StatusCode.OK
    secured.app.credentials.revoke("t6-a")
    assert _code(stubs.memory.ListMemories, request) is grpc.StatusCode.UNAUTHENTICATED
    wrong_secret = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert _code(secured.stubs(wrong_secret).memory.ListMemories, request) is grpc.StatusCode.UNAUTHENTICATED


def test_the_first_credential_turns_authentication_on(tmp_path):
    handle = start_server(make_config(tmp_path))
    try:
        open_stubs = handle.stubs()
        request = memory_pb2.ListMemoriesRequest(api_key_id="A")
        assert _code(open_stubs.memory.ListMemories, request) is grpc.StatusCode.OK
        token = _token(handle, "first", ["read:memory"], ["A"])
        assert _code(open_stubs.memory.ListMemories, request) is grpc.StatusCode.UNAUTHENTICATED
        assert _code(handle.stubs(token).memory.ListMemories, request) is grpc.StatusCode.OK
        handle.app.credentials.revoke("first")
        # Revoking the last credential does not open the server again.
        assert _code(open_stubs.memory.ListMemories, request) is grpc.StatusCode.UNAUTHENTICATED
    finally:
        handle.stop()


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[dict] = []
        self.setFormatter(JsonFormatter())

    def emit(self, record):
        self.lines.append(json.loads(self.format(record)))


@pytest.fixture
def audit_lines():
    logger = logging.getLogger("memsvc.audit")
    handler, level = _Capture(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.lines
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_refused_and_admin_calls_are_audited_without_secrets(secured, audit_lines):
    token = _token(secured, "t7-a", ["read:memory", "write:memory"], ["t7-A"])
    a = secured.stubs(token)
    b_id = _create(secured.stubs(ADMIN_ENV), "t7-B", "B's diary")
    audit_lines.clear()
    a.memory.CreateMemory(memory_pb2.CreateMemoryRequest(api_key_id="t7-A", content="ordinary write"), timeout=10)
    _code(a.memory.CreateMemory, memory_pb2.CreateMemoryRequest(api_key_id="t7-B", content="secret text"))
    _code(a.memory.DeleteMemory, memory_pb2.DeleteMemoryRequest(id=b_id))
    _code(secured.stubs("msk_000000000000_" + "x" * 43).memory.ListMemories, memory_pb2.ListMemoriesRequest())
    secured.stubs(ADMIN_ENV).settings.GetMemorySettings(settings_pb2.GetMemorySettingsRequest(), timeout=10)
    audit = [
        {k: line[k] for k in ("logger", "event", "token_id", "method", "tenant", "status")} for line in audit_lines
    ]
    assert audit == [
        {
            "logger": "memsvc.audit",
            "event": "audit",
            "token_id": "t7-a",
            "method": "/memsvc.v1.MemoryService/CreateMemory",
            "tenant": "t7-B",
            "status": "PERMISSION_DENIED",
        },
        {
            "logger": "memsvc.audit",
            "event": "audit",
            "token_id": "t7-a",
            "method": "/memsvc.v1.MemoryService/DeleteMemory",
            "tenant": "t7-B",
            "status": "NOT_FOUND",
        },
        {
            "logger": "memsvc.audit",
            "event": "audit",
            "token_id": None,
            "method": "/memsvc.v1.MemoryService/ListMemories",
            "tenant": None,
            "status": "UNAUTHENTICATED",
        },
        {
            "logger": "memsvc.audit",
            "event": "audit",
            "token_id": "env:1",
            "method": "/memsvc.v1.SettingsService/GetMemorySettings",
            "tenant": None,
            "status": "OK",
        },
    ]
    text = json.dumps(audit_lines)
    assert token not in text and token.split("_", 2)[2] not in text  # the secret may hold "_" itself
    assert "secret text" not in text and "diary" not in text
    assert ADMIN_ENV not in text


def test_an_invalid_update_of_another_tenants_memory_is_answered_like_one_of_a_missing_id(secured):
    """A patch the server refuses must not tell a tenant whether the id exists elsewhere:
    another tenant's memory and a missing one get the same answer, whatever the patch."""
    admin = secured.stubs(ADMIN_ENV)
    b_id = _create(admin, "t8-B", "B's memory")
    a = secured.stubs(_token(secured, "t8-a", ["read:memory", "write:memory"], ["t8-A"]))
    for request_for in (
        lambda i: memory_pb2.UpdateMemoryRequest(id=i),
        lambda i: memory_pb2.UpdateMemoryRequest(id=i, content="x" * 40_000),
        lambda i: memory_pb2.UpdateMemoryRequest(id=i, type="no-such-type"),
    ):
        with pytest.raises(grpc.RpcError) as theirs:
            a.memory.UpdateMemory(request_for(b_id), timeout=10)
        with pytest.raises(grpc.RpcError) as missing:
            a.memory.UpdateMemory(request_for("no-such-id"), timeout=10)
        assert (theirs.value.code(), error_info(theirs.value).reason) == (
            missing.value.code(),
            error_info(missing.value).reason,
        )
        assert theirs.value.details() == missing.value.details().replace("no-such-id", b_id)
    assert admin.memory.GetMemory(memory_pb2.GetMemoryRequest(id=b_id), timeout=10).content == "B's memory"


def test_a_listing_without_api_key_id_stays_confined_on_an_http_primary_backend(tmp_path):
    """A remote store is asked for the token's tenant, not for everything with the other
    tenants filtered out afterwards (or not at all)."""
    from google.protobuf import struct_pb2
    from support.fake_memory_api import FakeMemoryApi

    with FakeMemoryApi() as api:
        handle = start_server(make_config(tmp_path, api_tokens=(ADMIN_ENV,)))
        try:
            admin = handle.stubs(ADMIN_ENV)
            configs = struct_pb2.Struct()
            configs.update({"remote": {"type": "http", "baseUrl": api.base_url, "apiKey": "remote-key"}})
            admin.settings.UpdateMemorySettings(
                settings_pb2.UpdateMemorySettingsRequest(
                    settings={"primaryBackend": "remote", "backendConfigs": configs}
                ),
                timeout=10,
            )
            for owner in ("t9-A", "t9-B", "t9-C"):
                _create(admin, owner, f"note of {owner}")
            one = handle.stubs(_token(handle, "t9-a", ["read:memory"], ["t9-A"]))
            listing = one.memory.ListMemories(memory_pb2.ListMemoriesRequest(), timeout=10)
            assert [m.api_key_id for m in listing.data] == ["t9-A"] and listing.total == 1
            two = handle.stubs(_token(handle, "t9-ab", ["read:memory"], ["t9-A", "t9-B"]))
            listing = two.memory.ListMemories(memory_pb2.ListMemoriesRequest(), timeout=10)
            assert sorted(m.api_key_id for m in listing.data) == ["t9-A", "t9-B"] and listing.total == 2
            paged = [
                two.memory.ListMemories(memory_pb2.ListMemoriesRequest(limit=1, offset=n), timeout=10)
                for n in (0, 1, 2)
            ]
            assert [[m.api_key_id for m in p.data] for p in paged] == [["t9-B"], ["t9-A"], []]
            everything = admin.memory.ListMemories(memory_pb2.ListMemoriesRequest(), timeout=10)
            assert everything.total == 3
        finally:
            handle.stop()
