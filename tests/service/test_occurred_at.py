"""occurredAt through the real gRPC server: when the thing a memory records happened (the
time a chat turn was said), given by its writer and distinct from createdAt (when memsvc
stored it). Created, batched, upserted and updated; refused when more than a day in the
future or not a valid timestamp, with nothing stored; retention still measured on createdAt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf import timestamp_pb2
from grpc_status import rpc_status

from memsvc.v1 import memory_pb2 as pb
from tests.service.test_engine_retrieval import OWNER, enable, ids, preview, retrieve
from tests.service.test_memory_grpc import _create, _error, _row_count, _ts, _violated_fields

SAID = datetime(2023, 12, 31, 18, 45, 1, 250000, tzinfo=UTC)
LATER = datetime(2024, 1, 2, 9, 30, tzinfo=UTC)
# Seconds past year 9999, and nanos outside 0..999,999,999: no instant at all.
UNREADABLE = (timestamp_pb2.Timestamp(seconds=10**12), timestamp_pb2.Timestamp(seconds=0, nanos=-1))


def _get(stubs, memory_id: str) -> pb.Memory:
    return stubs.memory.GetMemory(pb.GetMemoryRequest(id=memory_id))


def _when(memory: pb.Memory) -> datetime | None:
    return memory.occurred_at.ToDatetime(UTC) if memory.HasField("occurred_at") else None


def _future() -> timestamp_pb2.Timestamp:
    return _ts(datetime.now(UTC) + timedelta(days=2))


def test_created_with_occurred_at_get_and_list_return_it_beside_created_at(stubs):
    created = _create(stubs, content="We hiked the ridge on New Year's Eve", occurred_at=_ts(SAID))
    got = _get(stubs, created.id)
    assert _when(got) == SAID
    assert got.created_at.ToDatetime(UTC) > SAID + timedelta(days=365)  # stored now, not then
    [listed] = stubs.memory.ListMemories(pb.ListMemoriesRequest(api_key_id="key-a")).data
    assert _when(listed) == SAID


def test_without_occurred_at_it_is_unset(stubs):
    got = _get(stubs, _create(stubs, content="no time given").id)
    assert not got.HasField("occurred_at")


def test_a_little_ahead_of_now_is_accepted(stubs):
    """A writer's clock may run a few hours ahead: up to one day after now is accepted."""
    ahead = datetime.now(UTC) + timedelta(hours=12)
    assert _when(_get(stubs, _create(stubs, content="clock ahead", occurred_at=_ts(ahead)).id)) == ahead


def test_more_than_a_day_in_the_future_is_invalid_argument_and_stores_nothing(server, stubs):
    err = _error(
        stubs.memory.CreateMemory, pb.CreateMemoryRequest(api_key_id="key-a", content="x", occurred_at=_future())
    )
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT and _violated_fields(err) == {"occurredAt"}
    assert "occurredAt" in err.details() and "is in the future" in err.details()
    assert _row_count(server) == 0


@pytest.mark.parametrize("bad", UNREADABLE, ids=["seconds", "nanos"])
def test_a_timestamp_that_is_no_instant_is_invalid_argument_and_stores_nothing(server, stubs, bad):
    err = _error(stubs.memory.CreateMemory, pb.CreateMemoryRequest(api_key_id="key-a", content="x", occurred_at=bad))
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT and _violated_fields(err) == {"occurredAt"}
    assert _row_count(server) == 0


def test_a_batch_stores_each_items_time_and_refuses_a_bad_one_alone(server, stubs):
    items = [
        pb.CreateMemoryRequest(api_key_id="key-b", content="turn one", occurred_at=_ts(SAID)),
        pb.CreateMemoryRequest(api_key_id="key-b", content="turn two, no time"),
        pb.CreateMemoryRequest(api_key_id="key-b", content="from the future", occurred_at=_future()),
        pb.CreateMemoryRequest(api_key_id="key-b", content="no instant", occurred_at=UNREADABLE[0]),
    ]
    answer = stubs.memory.CreateMemories(pb.CreateMemoriesRequest(memories=items))
    assert [r.success for r in answer.results] == [True, True, False, False]
    for refused in answer.results[2:]:
        assert refused.error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        assert "occurredAt" in refused.error.message
    assert _when(_get(stubs, answer.results[0].id)) == SAID
    assert not _get(stubs, answer.results[1].id).HasField("occurred_at")
    assert _row_count(server) == 2


def test_an_upsert_that_gives_occurred_at_replaces_it_and_one_that_does_not_keeps_it(stubs):
    first = _create(stubs, key="trip", content="Planning a trip to Porto", occurred_at=_ts(SAID))
    kept = _create(stubs, key="trip", content="Booked the trip to Porto")
    assert not kept.created and kept.id == first.id
    assert _when(_get(stubs, first.id)) == SAID
    _create(stubs, key="trip", content="Back from Porto", occurred_at=_ts(LATER))
    got = _get(stubs, first.id)
    assert (got.content, _when(got)) == ("Back from Porto", LATER)


def test_update_memory_changes_occurred_at_and_leaves_it_when_unset(server, stubs):
    memory_id = _create(stubs, content="Adopted a cat", occurred_at=_ts(SAID)).id
    updated = stubs.memory.UpdateMemory(pb.UpdateMemoryRequest(id=memory_id, occurred_at=_ts(LATER))).memory
    assert _when(updated) == LATER and _when(_get(stubs, memory_id)) == LATER
    content_only = stubs.memory.UpdateMemory(pb.UpdateMemoryRequest(id=memory_id, content="Adopted a cat, Miso"))
    assert _when(content_only.memory) == LATER
    never_known = _create(stubs, content="no time yet").id
    set_later = stubs.memory.UpdateMemory(pb.UpdateMemoryRequest(id=never_known, occurred_at=_ts(SAID))).memory
    assert _when(set_later) == SAID


@pytest.mark.parametrize("bad", [*UNREADABLE, None], ids=["seconds", "nanos", "future"])
def test_update_memory_refuses_a_bad_occurred_at_and_changes_nothing(stubs, bad):
    memory_id = _create(stubs, content="Adopted a cat", occurred_at=_ts(SAID)).id
    request = pb.UpdateMemoryRequest(id=memory_id, content="changed", occurred_at=bad or _future())
    err = _error(stubs.memory.UpdateMemory, request)
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT and "occurredAt" in _violated_fields(err)
    got = _get(stubs, memory_id)
    assert (got.content, _when(got)) == ("Adopted a cat", SAID)
    assert rpc_status.from_call(err).code == grpc.StatusCode.INVALID_ARGUMENT.value[0]


def test_an_imported_memory_with_an_old_occurred_at_is_retrieved_under_default_retention(stubs):
    """Retention is measured on createdAt: a chat history imported today with times of 2023
    is not hidden by the 30-day window."""
    enable(stubs)
    old_turn = _create(
        stubs, api_key_id=OWNER, content="Mira: I finally visited the lighthouse in Sagres", occurred_at=_ts(SAID)
    ).id
    found = retrieve(stubs, "lighthouse Sagres")
    assert ids(found) == [old_turn] and found.resolution.skipped_for_age == 0


@pytest.mark.parametrize("strategy", ["", "recent"], ids=["default", "recent"])
def test_retrieve_and_preview_return_occurred_at_when_known_and_leave_it_unset_otherwise(stubs, strategy):
    """A ranked result says when its memory happened, so a caller can tell an old chat turn
    from a fresh one; a memory with no known time has no occurredAt (not createdAt in its place)."""
    enable(stubs)
    said = _create(
        stubs, api_key_id=OWNER, content="Mira: the lighthouse in Sagres was closed", occurred_at=_ts(SAID)
    ).id
    unknown = _create(stubs, api_key_id=OWNER, content="Mira: the lighthouse keeper waved").id
    found = retrieve(stubs, "lighthouse", strategy=strategy)
    shown = preview(stubs, "lighthouse", api_key_id=OWNER, strategy=strategy or "hybrid")
    for response in (found, shown):
        assert {m.id: _when(m) for m in response.memories} == {said: SAID, unknown: None}
