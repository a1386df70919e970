"""Retrieval never crosses tenants unless the operator enabled scope global."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import struct_pb2

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb


def _settings(stubs, **values) -> None:
    patch = struct_pb2.Struct()
    patch.update(values)
    stubs.settings.UpdateMemorySettings(spb.UpdateMemorySettingsRequest(settings=patch))


@pytest.fixture
def two_tenants(stubs):
    _settings(stubs, enabled=True)
    stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="tenant-a", content="zebra stripes are a secret"))
    stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="tenant-b", content="zebra crossing nearby"))
    return stubs


def test_a_caller_cannot_ask_for_scope_global(two_tenants):
    with pytest.raises(grpc.RpcError) as info:
        two_tenants.engine.Retrieve(epb.RetrieveRequest(api_key_id="tenant-b", query="zebra", scope="global"))
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    own = two_tenants.engine.Retrieve(epb.RetrieveRequest(api_key_id="tenant-b", query="zebra"))
    assert [m.content for m in own.memories] == ["zebra crossing nearby"]


def test_scope_global_when_the_operator_enabled_it(two_tenants):
    _settings(two_tenants, scope="global")
    both = two_tenants.engine.Retrieve(epb.RetrieveRequest(api_key_id="tenant-b", query="zebra"))
    assert {m.content for m in both.memories} == {"zebra stripes are a secret", "zebra crossing nearby"}
    explicit = two_tenants.engine.Retrieve(epb.RetrieveRequest(query="zebra", scope="global"))
    assert len(explicit.memories) == 2
