"""OAuth access tokens through the real gRPC server: a JWT of the configured issuer (a real
authorization server on loopback, tests/support/oauth_server.py) is a credential the rule
table judges like any other; every kind of bad token is UNAUTHENTICATED, audited with its
reason, and changes nothing; the static tokens keep working beside it."""

from __future__ import annotations

import json
import logging
import time

import grpc
import pytest
from conftest import make_config, start_server
from support.oauth_server import OAuthServer

from memsvc.v1 import memory_pb2 as pb
from memsvc.v1 import settings_pb2

AUDIENCE = "http://127.0.0.1:8080"
ADMIN_TOKEN = "static-admin-token"


class AuditLines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[dict] = []

    def emit(self, record):
        self.lines.append({k: getattr(record, k, None) for k in ("token_id", "method", "tenant", "status", "reason")})


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    idp = OAuthServer.start()
    handle = start_server(
        make_config(
            tmp_path_factory.mktemp("oauth"),
            api_tokens=(ADMIN_TOKEN,),
            oauth_issuer=idp.issuer,
            oauth_audience=AUDIENCE,
            oauth_jwks_refresh_s=0.0,
        )
    )
    audit = AuditLines()
    logger = logging.getLogger("memsvc.audit")
    level = logger.level
    logger.addHandler(audit)
    logger.setLevel(logging.INFO)
    try:
        yield idp, handle, audit
    finally:
        logger.removeHandler(audit)
        logger.setLevel(level)
        handle.stop()
        idp.stop()


def _code(call, request) -> grpc.StatusCode:
    try:
        call(request, timeout=10)
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def _count(handle, tenant: str) -> int:
    return handle.stubs(ADMIN_TOKEN).memory.ListMemories(pb.ListMemoriesRequest(api_key_id=tenant)).total


def test_a_valid_token_works_within_its_tenants_and_scopes(world):
    idp, handle, audit = world
    token = idp.sign(idp.claims(AUDIENCE, "read:memory write:memory", ["alice"]))
    stubs = handle.stubs(token)
    made = stubs.memory.CreateMemory(pb.CreateMemoryRequest(api_key_id="alice", content="likes green tea"))
    assert made.success and made.created
    assert stubs.memory.ListMemories(pb.ListMemoriesRequest()).total == _count(handle, "alice") >= 1
    before = _count(handle, "bob")
    assert _code(stubs.memory.CreateMemory, pb.CreateMemoryRequest(api_key_id="bob", content="x")) == (
        grpc.StatusCode.PERMISSION_DENIED
    )
    assert _count(handle, "bob") == before
    assert _code(stubs.settings.GetMemorySettings, settings_pb2.GetMemorySettingsRequest()) == (
        grpc.StatusCode.PERMISSION_DENIED
    )
    assert any(
        line["token_id"] == "oauth:alice" and line["tenant"] == "bob" and line["status"] == "PERMISSION_DENIED"
        for line in audit.lines
    )
    reader = handle.stubs(idp.sign(idp.claims(AUDIENCE, "read:memory", ["alice"])))
    assert _code(reader.memory.CreateMemory, pb.CreateMemoryRequest(api_key_id="alice", content="y")) == (
        grpc.StatusCode.PERMISSION_DENIED
    )
    admin = handle.stubs(idp.sign(idp.claims(AUDIENCE, "admin", [])))
    assert _code(admin.settings.GetMemorySettings, settings_pb2.GetMemorySettingsRequest()) == grpc.StatusCode.OK
    # The static tokens keep working beside OAuth.
    assert _code(handle.stubs(ADMIN_TOKEN).memory.ListMemories, pb.ListMemoriesRequest()) == grpc.StatusCode.OK


BAD_TOKENS = {
    "expired": lambda s: s.sign(s.claims(AUDIENCE, "write:memory", ["alice"], exp=int(time.time()) - 300)),
    "wrong-audience": lambda s: s.sign(s.claims("http://127.0.0.1:1/other", "write:memory", ["alice"])),
    "wrong-issuer": lambda s: s.sign(s.claims(AUDIENCE, "write:memory", ["alice"], iss="http://127.0.0.1:2")),
    "alg-none": lambda s: s.unsigned(s.claims(AUDIENCE, "write:memory", ["alice"])),
    "hs256-public-key": lambda s: s.hs256_with_public_key(s.claims(AUDIENCE, "write:memory", ["alice"])),
    "garbage": lambda s: "a.b.c",
}


@pytest.mark.parametrize("kind", list(BAD_TOKENS))
def test_bad_tokens_are_refused_audited_and_change_nothing(world, kind):
    idp, handle, audit = world
    token = BAD_TOKENS[kind](idp)
    before = _count(handle, "alice")
    seen = len(audit.lines)
    stubs = handle.stubs(token)
    with pytest.raises(grpc.RpcError) as err:
        stubs.memory.CreateMemory(pb.CreateMemoryRequest(api_key_id="alice", content="should not land"), timeout=10)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "invalid access token" in err.value.details()
    assert _count(handle, "alice") == before
    refused = [line for line in audit.lines[seen:] if line["method"] == "/memsvc.v1.MemoryService/CreateMemory"]
    assert refused and refused[0]["status"] == "UNAUTHENTICATED" and refused[0]["token_id"] is None
    assert refused[0]["reason"] and token not in json.dumps(refused)


def test_no_token_is_unauthenticated_with_oauth_on(world):
    _, handle, _ = world
    assert _code(handle.stubs().memory.ListMemories, pb.ListMemoriesRequest()) == grpc.StatusCode.UNAUTHENTICATED


def test_rotated_keys_are_fetched_and_a_removed_key_is_refused(world):
    idp, handle, _ = world
    old = idp.current
    old_token = idp.sign(idp.claims(AUDIENCE, "read:memory", ["alice"]))
    assert _code(handle.stubs(old_token).memory.ListMemories, pb.ListMemoriesRequest()) == grpc.StatusCode.OK
    idp.rotate()
    new_token = idp.sign(idp.claims(AUDIENCE, "read:memory", ["alice"]))
    assert _code(handle.stubs(new_token).memory.ListMemories, pb.ListMemoriesRequest()) == grpc.StatusCode.OK
    idp.drop(str(old.kid))
    idp.rotate()  # the next unknown kid makes memsvc fetch the set without the old key
    newer = idp.sign(idp.claims(AUDIENCE, "read:memory", ["alice"]))
    assert _code(handle.stubs(newer).memory.ListMemories, pb.ListMemoriesRequest()) == grpc.StatusCode.OK
    assert _code(handle.stubs(old_token).memory.ListMemories, pb.ListMemoriesRequest()) == (
        grpc.StatusCode.UNAUTHENTICATED
    )


def test_a_token_of_another_tenant_is_denied(world):
    idp, handle, _ = world
    bob = handle.stubs(idp.sign(idp.claims(AUDIENCE, "read:memory write:memory", ["bob"])))
    assert _count(handle, "alice") >= 1
    assert bob.memory.ListMemories(pb.ListMemoriesRequest()).total == 0  # confined to bob, who has none
    assert _code(bob.memory.ListMemories, pb.ListMemoriesRequest(api_key_id="alice")) == (
        grpc.StatusCode.PERMISSION_DENIED
    )
