"""A remote primary backend that ignores the apiKeyId and sessionId it is sent (a loopback REST API
that filters on parameters memsvc never sends) answers every tenant's rows: none of them
reaches a caller who did not ask for that owner, on any read through the backend, and the
listing's counts leave them out. Through the real gRPC server."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from conftest import ServerHandle, make_config, start_server
from google.protobuf import struct_pb2
from support.fake_memory_api import FakeMemoryApi

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb

ADMIN = "env-admin-token"


@pytest.fixture
def remote(tmp_path) -> Iterator[tuple[ServerHandle, FakeMemoryApi]]:
    with FakeMemoryApi(params={"apiKeyId": "never-sent", "sessionId": "never-sent-either"}) as api:
        handle = start_server(make_config(tmp_path, api_tokens=(ADMIN,)))
        try:
            configs = struct_pb2.Struct()
            configs.update({"remote": {"type": "http", "baseUrl": api.base_url, "apiKey": "remote-key"}})
            settings = struct_pb2.Struct()
            settings.update({"enabled": True, "primaryBackend": "remote"})
            settings["backendConfigs"] = configs
            handle.stubs(ADMIN).settings.UpdateMemorySettings(
                spb.UpdateMemorySettingsRequest(settings=settings), timeout=10
            )
            yield handle, api
        finally:
            handle.stop()


def _create(stubs, owner: str, content: str, kind: str = "factual") -> str:
    return stubs.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id=owner, content=content, type=kind), timeout=10
    ).id


def test_a_remote_that_ignores_api_key_id_never_leaks_other_tenants(remote):
    handle, api = remote
    admin = handle.stubs(ADMIN)
    mine = {_create(admin, "alice", "alice keeps bees"), _create(admin, "alice", "alice met bob", "episodic")}
    theirs = _create(admin, "bob", "bob keeps bees too, secretly", "episodic")
    assert len(api.memories) == 3
    alice = handle.stubs(handle.app.credentials.create("alice", ["read:memory"], ["alice"], False).token)
    for stubs in (alice, admin):  # the owner asked for, not only the token's tenants
        listing = stubs.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="alice"), timeout=10)
        assert {m.id for m in listing.data} == mine
        assert listing.total == listing.stats.total == 2
        assert dict(listing.stats.by_type) == {"factual": 1, "episodic": 1}
        assert listing.stats.tokens_used == sum(-(-len(m.content) // 4) for m in listing.data)
    confined = alice.memory.ListMemories(mpb.ListMemoriesRequest(), timeout=10)
    assert {m.id for m in confined.data} == mine
    with pytest.raises(grpc.RpcError) as info:
        alice.memory.GetMemory(mpb.GetMemoryRequest(id=theirs), timeout=10)
    assert info.value.code() is grpc.StatusCode.NOT_FOUND
    for query in ("bees", ""):  # the backend's search, and its newest memories without a query
        found = alice.engine.Retrieve(epb.RetrieveRequest(api_key_id="alice", query=query), timeout=10)
        assert {m.id for m in found.memories} <= mine and found.memories, query
    preview = alice.engine.RetrievePreview(epb.RetrievePreviewRequest(api_key_id="alice", query="bees"), timeout=10)
    assert "secretly" not in str(preview)


def test_a_session_listing_keeps_only_that_session(remote):
    handle, _ = remote
    admin = handle.stubs(ADMIN)
    kept = admin.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="alice", session_id="s1", content="said in s1"), timeout=10
    ).id
    admin.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="alice", session_id="s2", content="said in s2"), timeout=10
    )
    listing = admin.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="alice", session_id="s1"), timeout=10)
    assert [m.id for m in listing.data] == [kept] and listing.total == 1
