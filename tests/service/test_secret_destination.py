"""A stored secret never follows a changed address: a settings write that moves a backend's
`baseUrl` (or its type's default one) or Qdrant's host/port without giving the key again is
INVALID_ARGUMENT on the key's field and saves nothing; the loopback server at the new
address never receives the old key. Giving the key, or removing it, is accepted. Through
the real gRPC server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf import json_format
from support.fake_api import FakeApi, Reply, Request
from support.rpc_errors import error, violated_fields
from support.vectors import C, set_qdrant, struct

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb

pytestmark = [pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection:UserWarning")]
OLD_SECRET = "old-secret-0123456789"


class Listener(FakeApi):
    """Answers every request with an empty listing and records what it was sent."""

    def route(self, request: Request) -> Reply:
        return Reply(200, {"data": [], "total": 0})

    def carried(self, secret: str) -> list[str]:
        """The paths of the requests that carried `secret` in any header."""
        return [r.path for r in self.requests if any(secret in v for v in r.headers.values())]


@pytest.fixture
def listeners() -> Iterator[tuple[Listener, Listener]]:
    with Listener() as old, Listener() as new:
        yield old, new


def _memory_settings(stubs, **values: Any) -> spb.MemorySettings:
    return stubs.settings.UpdateMemorySettings(spb.UpdateMemorySettingsRequest(settings=struct(values)))


def _backend(stubs) -> dict[str, Any]:
    answer = json_format.MessageToDict(stubs.settings.GetMemorySettings(spb.GetMemorySettingsRequest()))
    return answer["backendConfigs"]["remote"]


def _use_remote(stubs) -> None:
    """Calls that reach the primary backend, and a probe of every configured one."""
    stubs.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id="alice"))
    stubs.engine.GetEngineStatus(epb.GetEngineStatusRequest())


def test_a_backend_key_is_not_sent_to_a_changed_base_url(stubs, listeners):
    old, new = listeners
    _memory_settings(
        stubs,
        primaryBackend="remote",
        backendConfigs={"remote": {"type": "http", "baseUrl": old.base_url, "apiKey": OLD_SECRET}},
    )
    _use_remote(stubs)
    assert old.carried(OLD_SECRET), "the stored key reaches the address it was given for"
    err = error(
        stubs.settings.UpdateMemorySettings,
        spb.UpdateMemorySettingsRequest(
            settings=struct({"backendConfigs": {"remote": {"type": "http", "baseUrl": new.base_url + "/"}}})
        ),
    )
    assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"backendConfigs.remote.apiKey"}
    assert "given again" in err.details() and OLD_SECRET not in err.details()
    assert _backend(stubs)["baseUrl"] == old.base_url and _backend(stubs)["hasApiKey"] is True
    _use_remote(stubs)
    assert new.requests == []
    # Removing the key, or giving one, moves it; the old key never goes to the new address.
    _memory_settings(stubs, backendConfigs={"remote": {"type": "http", "baseUrl": new.base_url, "apiKey": ""}})
    _use_remote(stubs)
    assert new.requests and new.carried(OLD_SECRET) == []
    assert all("authorization" not in r.headers for r in new.requests)
    _memory_settings(stubs, backendConfigs={"remote": {"type": "http", "baseUrl": old.base_url, "apiKey": "new-one"}})
    assert _backend(stubs)["hasApiKey"] is True and _backend(stubs)["baseUrl"] == old.base_url


def test_a_type_change_that_moves_the_default_base_url_needs_the_key(stubs, listeners):
    old, _ = listeners
    _memory_settings(
        stubs, backendConfigs={"remote": {"type": "obsidian", "baseUrl": old.base_url, "apiKey": OLD_SECRET}}
    )
    err = error(
        stubs.settings.UpdateMemorySettings,
        spb.UpdateMemorySettingsRequest(settings=struct({"backendConfigs": {"remote": {"type": "obsidian"}}})),
    )  # the default https://127.0.0.1:27124
    assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"backendConfigs.remote.apiKey"}
    # The same address, sent back as read (masked fields and all), keeps the key.
    _memory_settings(stubs, backendConfigs={"remote": {**_backend(stubs), "folder": "notes"}})
    assert _backend(stubs)["hasApiKey"] is True and _backend(stubs)["folder"] == "notes"


def _qdrant(stubs) -> spb.QdrantSettings:
    return stubs.settings.GetQdrantSettings(spb.GetQdrantSettingsRequest())


def test_the_qdrant_key_is_not_sent_to_a_changed_host_or_port(stubs, listeners):
    old, new = listeners
    set_qdrant(stubs, enabled=True, host="127.0.0.1", port=old.port, apiKey=OLD_SECRET)
    stubs.settings.CheckQdrantHealth(spb.CheckQdrantHealthRequest())
    assert old.carried(OLD_SECRET), "the stored key reaches the server it was given for"
    for moved in ({"port": new.port}, {"host": f"http://127.0.0.1:{new.port}"}, {"host": "localhost"}):
        err = error(stubs.settings.UpdateQdrantSettings, spb.UpdateQdrantSettingsRequest(settings=struct(moved)))
        assert err.code() == C.INVALID_ARGUMENT and violated_fields(err) == {"apiKey"}, moved
    assert (_qdrant(stubs).host, _qdrant(stubs).port, _qdrant(stubs).has_api_key) == ("127.0.0.1", old.port, True)
    stubs.settings.CheckQdrantHealth(spb.CheckQdrantHealthRequest())
    assert new.requests == []
    set_qdrant(stubs, collection="other_collection")  # not where the key goes: kept
    assert _qdrant(stubs).has_api_key
    set_qdrant(stubs, port=new.port, apiKey="")
    stubs.settings.CheckQdrantHealth(spb.CheckQdrantHealthRequest())
    assert new.requests and new.carried(OLD_SECRET) == []
