"""Retention a user can see, through the real gRPC server: the resolution counts the
memories that retention hid, `retentionDays: 0` means no age limit, and a memory created
with `keep` is never hidden for its age (expiry still applies to it).

Ages are moved with direct SQL, as the retrieval tests do.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest

from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb
from tests.service.test_engine_retrieval import (
    OWNER,
    STRATEGIES,
    create,
    enable,
    ids,
    iso,
    preview,
    retrieve,
    sql,
    struct,
)


def age(server, memory_id: str, days: int) -> None:
    sql(
        server,
        "UPDATE memories SET created_at = ? WHERE id = ?",
        (iso(datetime.now(UTC) - timedelta(days=days)), memory_id),
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_resolution_counts_the_memories_hidden_for_their_age(server, stubs, strategy):
    enable(stubs, retentionDays=30)
    old = [create(stubs, f"old note {i} about herons") for i in range(3)]
    fresh = create(stubs, "fresh note about herons")
    create(stubs, "another owner's old note about herons", api_key_id="key-other")
    for memory_id in old:
        age(server, memory_id, 40)

    resp = retrieve(stubs, "herons", strategy=strategy)
    assert ids(resp) == [fresh]
    assert resp.resolution.skipped_for_age == 3
    assert preview(stubs, "herons", strategy=strategy, api_key_id=OWNER).resolution.skipped_for_age == 3

    enable(stubs, retentionDays=60)  # inside the window again: nothing hidden, nothing counted
    resp = retrieve(stubs, "herons", strategy=strategy)
    assert set(ids(resp)) == {fresh, *old} and resp.resolution.skipped_for_age == 0


def test_expired_and_session_scoped_out_memories_are_not_counted_as_aged(server, stubs):
    enable(stubs, retentionDays=30, scope="session")
    aged_here = create(stubs, "old note about herons", session_id="s1")
    aged_elsewhere = create(stubs, "old note about herons elsewhere", session_id="s2")
    aged_and_expired = create(stubs, "old expired note about herons", session_id="s1")
    for memory_id in (aged_here, aged_elsewhere, aged_and_expired):
        age(server, memory_id, 40)
    sql(server, "UPDATE memories SET expires_at = '2001-01-01T00:00:00.000000Z' WHERE id = ?", (aged_and_expired,))

    resp = retrieve(stubs, "herons", session_id="s1")
    assert ids(resp) == [] and resp.resolution.skipped_for_age == 1


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_retention_days_0_means_no_age_limit(server, stubs, strategy):
    enable(stubs, retentionDays=0)
    ancient = create(stubs, "ancient fact about otters")
    age(server, ancient, 3000)

    resp = retrieve(stubs, "otters", strategy=strategy)
    assert ids(resp) == [ancient] and resp.resolution.skipped_for_age == 0
    assert stubs.settings.GetMemorySettings(spb.GetMemorySettingsRequest()).retention_days == 0


def test_retention_days_out_of_range_is_refused_and_changes_nothing(server, stubs):
    enable(stubs, retentionDays=45)
    for bad in (-1, 366):
        with pytest.raises(grpc.RpcError) as err:
            enable(stubs, retentionDays=bad)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "retentionDays" in err.value.details()
    assert stubs.settings.GetMemorySettings(spb.GetMemorySettingsRequest()).retention_days == 45


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_kept_memory_is_never_hidden_for_its_age(server, stubs, strategy):
    enable(stubs, retentionDays=30)
    name = create(stubs, "The user's name is Ada", keep=True)
    note = create(stubs, "Ada mentioned a dentist appointment")
    for memory_id in (name, note):
        age(server, memory_id, 400)

    resp = retrieve(stubs, "Ada", strategy=strategy)
    assert ids(resp) == [name] and resp.resolution.skipped_for_age == 1
    got = stubs.memory.GetMemory(mpb.GetMemoryRequest(id=name))
    assert got.keep and not stubs.memory.GetMemory(mpb.GetMemoryRequest(id=note)).keep


def test_a_kept_memory_still_expires(server, stubs):
    enable(stubs, retentionDays=30)
    kept = create(stubs, "The user's name is Ada", keep=True)
    sql(server, "UPDATE memories SET expires_at = '2001-01-01T00:00:00.000000Z' WHERE id = ?", (kept,))
    assert ids(retrieve(stubs, "Ada")) == []


def test_an_upsert_by_key_can_keep_and_release_a_memory(server, stubs):
    enable(stubs, retentionDays=30)
    first = create(stubs, "The user's name is Ada", key="profile:name")
    age(server, first, 40)
    assert ids(retrieve(stubs, "Ada")) == []

    assert create(stubs, "The user's name is Ada", key="profile:name", keep=True) == first
    age(server, first, 40)
    assert ids(retrieve(stubs, "Ada")) == [first]

    create(stubs, "The user's name is Ada", key="profile:name", metadata=struct({"source": "chat"}))
    age(server, first, 40)
    assert ids(retrieve(stubs, "Ada")) == [first], "an upsert that does not say keep leaves it as it was"

    create(stubs, "The user's name is Ada", key="profile:name", keep=False)
    age(server, first, 40)
    assert ids(retrieve(stubs, "Ada")) == []


def test_inject_reports_the_memories_hidden_for_their_age(server, stubs):
    from memsvc.v1 import engine_pb2 as epb

    enable(stubs, retentionDays=30)
    old = create(stubs, "The user prefers concise answers about herons")
    fresh = create(stubs, "The user prefers herons in examples")
    age(server, old, 40)
    body = struct({"model": "gpt-4o", "messages": [{"role": "user", "content": "Tell me about herons"}]})
    out = stubs.engine.Inject(epb.InjectRequest(request=body, provider="openai", api_key_id=OWNER, min_score=0))
    assert out.injected and list(out.memory_ids) == [fresh] and out.skipped_for_age == 1
