"""ClearMemories through a remote primary deletes only what its filter matches. The remote
stand-in (a real loopback REST API) ignores the apiKeyId and sessionId memsvc sends and
knows nothing of an age limit, so its listing answers every tenant's rows: one tenant's
clear must leave every other tenant's rows on the remote, checked on the stand-in's own
store. Through the real gRPC server."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf import timestamp_pb2
from test_backend_owner_filter import ADMIN, _create, remote  # noqa: F401 - the stand-in remote primary

from memsvc.backends.base import CLEAR_PAGE
from memsvc.v1 import memory_pb2 as mpb

OLD = "2020-01-01T00:00:00+00:00"


def _owners(api) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in api.memories.values():
        counts[m["apiKeyId"]] = counts.get(m["apiKeyId"], 0) + 1
    return counts


def _tenant(handle, owner: str):
    return handle.stubs(handle.app.credentials.create(owner, ["read:memory", "write:memory"], [owner], False).token)


def test_a_tenants_clear_leaves_other_tenants_rows_on_a_remote_that_ignores_api_key_id(remote):  # noqa: F811
    handle, api = remote
    admin = handle.stubs(ADMIN)
    mine = {_create(admin, "alice", f"alice note {i}") for i in range(3)}
    # More than a page of bob's rows, newer than alice's: the remote lists them first.
    admin.memory.CreateMemories(
        mpb.CreateMemoriesRequest(
            memories=[
                mpb.CreateMemoryRequest(api_key_id="bob", content=f"bob note {i}") for i in range(CLEAR_PAGE + 20)
            ]
        ),
        timeout=60,
    )
    assert _owners(api) == {"alice": 3, "bob": CLEAR_PAGE + 20}
    cleared = _tenant(handle, "alice").memory.ClearMemories(mpb.ClearMemoriesRequest(api_key_id="alice"), timeout=60)
    assert cleared.deleted_count == 3
    assert _owners(api) == {"bob": CLEAR_PAGE + 20}, "alice's clear deleted another tenant's memories"
    assert not mine & api.memories.keys()


def test_a_clear_by_session_or_age_keeps_the_rest_of_the_tenants_rows(remote):  # noqa: F811
    handle, api = remote
    admin = handle.stubs(ADMIN)
    alice = _tenant(handle, "alice")
    s1 = admin.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="alice", session_id="s1", content="in s1"), timeout=10
    ).id
    s2 = admin.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id="alice", session_id="s2", content="in s2"), timeout=10
    ).id
    old, new = _create(admin, "alice", "an old note"), _create(admin, "alice", "a new note")
    bob_old = _create(admin, "bob", "bob's old note")
    for memory_id in (old, bob_old):
        api.memories[memory_id]["createdAt"] = OLD
    by_session = alice.memory.ClearMemories(mpb.ClearMemoriesRequest(api_key_id="alice", session_id="s1"), timeout=10)
    assert by_session.deleted_count == 1 and s1 not in api.memories and s2 in api.memories
    cutoff = timestamp_pb2.Timestamp()
    cutoff.FromDatetime(datetime(2021, 1, 1, tzinfo=UTC))
    by_age = alice.memory.ClearMemories(mpb.ClearMemoriesRequest(api_key_id="alice", older_than=cutoff), timeout=10)
    assert by_age.deleted_count == 1 and old not in api.memories
    assert {new, s2, bob_old} <= api.memories.keys()
