"""The cache of verified credentials (memsvc.core.credentials.Credentials) through the real
gRPC server: a credential created or revoked through another store on the same data dir (as
another process or the CLI would) holds at the very next request although the server had the
credential cached; a flood of made-up or wrong tokens adds nothing to the cache; the cache
never holds more than its bound, and a credential pushed out of it still works."""

from __future__ import annotations

import secrets

import grpc
import pytest
from conftest import make_config, start_server

from memsvc.core.credentials import CACHE_SIZE, Credentials
from memsvc.storage.stores import open_admin
from memsvc.v1 import memory_pb2, memory_pb2_grpc

ENV_ADMIN = "cache-env-admin"


@pytest.fixture
def served(tmp_path):
    """(server, Credentials over a store of its own on the server's data dir)."""
    config = make_config(tmp_path, api_tokens=(ENV_ADMIN,))
    handle = start_server(config)
    other = open_admin(config)
    try:
        yield handle, Credentials(other.credential_store)
    finally:
        other.close()
        handle.stop()


def _code(server, token: str, owner: str = "A") -> grpc.StatusCode:
    stub = memory_pb2_grpc.MemoryServiceStub(server.channels[0] if server.channels else server.channel())
    try:
        stub.ListMemories(
            memory_pb2.ListMemoriesRequest(api_key_id=owner),
            timeout=10,
            metadata=(("authorization", f"Bearer {token}"),),
        )
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def test_a_revocation_through_another_store_holds_at_the_next_request_despite_the_cache(served):
    server, elsewhere = served
    token = elsewhere.create("agent", ["read:memory"], ["A"], False).token
    assert _code(server, token) is grpc.StatusCode.OK
    assert server.app.credentials.cached() == 1
    assert _code(server, token) is grpc.StatusCode.OK  # answered from the cache
    elsewhere.revoke("agent")
    assert _code(server, token) is grpc.StatusCode.UNAUTHENTICATED
    fresh = elsewhere.create("agent-2", ["read:memory"], ["A"], False).token
    assert _code(server, fresh) is grpc.StatusCode.OK
    assert _code(server, token) is grpc.StatusCode.UNAUTHENTICATED


def test_a_flood_of_bad_tokens_adds_nothing_to_the_cache(served):
    server, elsewhere = served
    token = elsewhere.create("real", ["read:memory"], ["A"], False).token
    assert _code(server, token) is grpc.StatusCode.OK
    lookup = token.split("_")[1]
    bad = [f"msk_{secrets.token_hex(6)}_{secrets.token_urlsafe(32)}" for _ in range(300)]  # unknown lookups
    bad += [f"msk_{lookup}_{secrets.token_urlsafe(32)}" for _ in range(100)]  # a known lookup, wrong secret
    bad += [secrets.token_urlsafe(40) for _ in range(100)]  # not a credential token at all
    for made_up in bad:
        assert _code(server, made_up) is grpc.StatusCode.UNAUTHENTICATED
    assert server.app.credentials.cached() == 1
    assert _code(server, token) is grpc.StatusCode.OK


def test_the_cache_is_bounded_and_what_it_dropped_still_verifies(served):
    server, elsewhere = served
    tokens = [elsewhere.create(f"c{i}", ["read:memory"], ["A"], False).token for i in range(CACHE_SIZE + 5)]
    for token in tokens:
        assert _code(server, token) is grpc.StatusCode.OK
    assert server.app.credentials.cached() == CACHE_SIZE
    assert _code(server, tokens[0]) is grpc.StatusCode.OK  # the least recently used was dropped: read again
    assert server.app.credentials.cached() == CACHE_SIZE
