"""MemoryService CRUD through the real gRPC server and generated stubs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf import struct_pb2, timestamp_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from memsvc.core.memories import HEALTH_OWNER
from memsvc.v1 import memory_pb2 as pb


def _struct(**values) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(values)
    return s


def _ts(dt: datetime) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(dt)
    return ts


def _error(call, *args):
    with pytest.raises(grpc.RpcError) as info:
        call(*args)
    return info.value


def _details(err: grpc.RpcError) -> tuple[list[error_details_pb2.ErrorInfo], list[error_details_pb2.BadRequest]]:
    status = rpc_status.from_call(err)
    infos, bad = [], []
    for any_ in status.details if status else []:
        if any_.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            any_.Unpack(info)
            infos.append(info)
        elif any_.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            br = error_details_pb2.BadRequest()
            any_.Unpack(br)
            bad.append(br)
    return infos, bad


def _violated_fields(err: grpc.RpcError) -> set[str]:
    _, bad = _details(err)
    return {v.field for br in bad for v in br.field_violations}


def _create(stubs, **fields) -> pb.CreateMemoryResponse:
    fields.setdefault("api_key_id", "key-a")
    return stubs.memory.CreateMemory(pb.CreateMemoryRequest(**fields))


def _row_count(server) -> int:
    with server.app.database.read() as conn:
        return conn.execute("SELECT count(*) FROM memories").fetchone()[0]


def test_crud_round_trip(stubs):
    expires = datetime.now(UTC) + timedelta(days=3)
    created = _create(
        stubs,
        session_id="s1",
        type="episodic",
        key="decision:bun",
        content="I'm going to use Bun",
        metadata=_struct(category="decision", n=2),
        expires_at=_ts(expires),
    )
    assert created.success and created.created and created.id

    got = stubs.memory.GetMemory(pb.GetMemoryRequest(id=created.id))
    assert (got.api_key_id, got.session_id, got.type, got.key, got.content) == (
        "key-a",
        "s1",
        "episodic",
        "decision:bun",
        "I'm going to use Bun",
    )
    assert dict(got.metadata) == {"category": "decision", "n": 2}
    assert got.expires_at.ToDatetime(UTC) == expires.replace(microsecond=expires.microsecond)
    assert got.created_at.seconds > 0 and got.created_at == got.updated_at

    updated = stubs.memory.UpdateMemory(
        pb.UpdateMemoryRequest(id=created.id, content="I'm going to use Deno", metadata=_struct(category="decision"))
    )
    assert updated.success and updated.memory.content == "I'm going to use Deno"
    assert dict(updated.memory.metadata) == {"category": "decision"}
    assert stubs.memory.GetMemory(pb.GetMemoryRequest(id=created.id)).content == "I'm going to use Deno"

    assert stubs.memory.DeleteMemory(pb.DeleteMemoryRequest(id=created.id)).success
    err = _error(stubs.memory.GetMemory, pb.GetMemoryRequest(id=created.id))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    infos, _ = _details(err)
    assert [i.reason for i in infos] == ["NOT_FOUND"]


def test_missing_ids_are_not_found(stubs):
    for call, request in (
        (stubs.memory.GetMemory, pb.GetMemoryRequest(id="nope")),
        (stubs.memory.DeleteMemory, pb.DeleteMemoryRequest(id="nope")),
        (stubs.memory.UpdateMemory, pb.UpdateMemoryRequest(id="nope", content="x y z")),
    ):
        assert _error(call, request).code() == grpc.StatusCode.NOT_FOUND


def test_upsert_on_api_key_and_key_merges_metadata(server, stubs):
    first = _create(stubs, key="preference:tabs", content="tabs", metadata=_struct(a=1, b="old"))
    second = _create(
        stubs, key="preference:tabs", content="tabs, always", type="procedural", metadata=_struct(b="new", c=True)
    )
    assert second.id == first.id and first.created and not second.created
    other_owner = _create(stubs, api_key_id="key-b", key="preference:tabs", content="tabs")
    assert other_owner.id != first.id
    got = stubs.memory.GetMemory(pb.GetMemoryRequest(id=first.id))
    assert got.content == "tabs, always" and got.type == "procedural"
    assert dict(got.metadata) == {"a": 1, "b": "new", "c": True}
    assert _row_count(server) == 2


@pytest.mark.parametrize(
    "fields, violated",
    [
        ({"expires_at": _ts(datetime(2031, 1, 1, tzinfo=UTC))}, {"expiresAt"}),
        ({"type": "bogus"}, {"type"}),
        ({"api_key_id": "key-b"}, {"apiKeyId"}),
        ({"session_id": "s2", "access_count": 5}, {"sessionId", "accessCount"}),
        ({}, {"body"}),
    ],
)
def test_update_refuses_other_fields_and_changes_nothing(stubs, fields, violated):
    created = _create(stubs, key="k", content="original content")
    before = stubs.memory.GetMemory(pb.GetMemoryRequest(id=created.id))
    err = _error(
        stubs.memory.UpdateMemory,
        pb.UpdateMemoryRequest(id=created.id, content="changed", **fields)
        if fields
        else pb.UpdateMemoryRequest(id=created.id),
    )
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert violated <= _violated_fields(err)
    assert stubs.memory.GetMemory(pb.GetMemoryRequest(id=created.id)) == before


def test_update_to_a_key_the_owner_already_uses_is_a_conflict(stubs):
    _create(stubs, key="k1", content="one")
    second = _create(stubs, key="k2", content="two")
    err = _error(stubs.memory.UpdateMemory, pb.UpdateMemoryRequest(id=second.id, key="k1"))
    assert err.code() == grpc.StatusCode.ABORTED
    assert [i.reason for i in _details(err)[0]] == ["DUPLICATE_KEY"]


@pytest.mark.parametrize(
    "fields, violated",
    [
        ({"api_key_id": ""}, {"apiKeyId"}),
        ({"content": "   "}, {"content"}),
        ({"content": "x" * (32 * 1024 + 1)}, {"content"}),
        ({"content": "é" * (16 * 1024 + 1)}, {"content"}),  # 32 KiB is measured in UTF-8 bytes
        ({"key": "k" * 513}, {"key"}),
        ({"type": "opinion"}, {"type"}),
        ({"metadata": _struct(blob="m" * (16 * 1024))}, {"metadata"}),
        ({"expires_at": _ts(datetime(2001, 1, 1, tzinfo=UTC))}, {"expiresAt"}),
        ({"api_key_id": HEALTH_OWNER}, {"apiKeyId"}),
        ({"api_key_id": "", "type": "opinion", "content": ""}, {"apiKeyId", "type", "content"}),
    ],
)
def test_create_validation_lists_every_violation_and_stores_nothing(server, stubs, fields, violated):
    request = {"api_key_id": "key-a", "content": "valid content", **fields}
    err = _error(stubs.memory.CreateMemory, pb.CreateMemoryRequest(**request))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert _violated_fields(err) == violated
    assert _row_count(server) == 0


def test_limits_are_inclusive(stubs):
    assert _create(stubs, content="x" * (32 * 1024), key="k" * 512).success


def test_list_filters_before_stats_and_pages(stubs):
    _create(stubs, content="I write TypeScript daily")
    _create(stubs, content="typescript generics", type="semantic")
    _create(stubs, content="Python scripts")
    _create(stubs, api_key_id="key-b", content="TypeScript too")
    listed = stubs.memory.ListMemories(pb.ListMemoriesRequest(api_key_id="key-a", q="typescript"))
    assert listed.total == 2 and listed.stats.total == 2
    assert {m.content for m in listed.data} == {"I write TypeScript daily", "typescript generics"}
    assert listed.stats.by_type["factual"] == 1 and listed.stats.by_type["semantic"] == 1
    assert listed.stats.tokens_used == -(-len("I write TypeScript daily") // 4) + -(-len("typescript generics") // 4)
    assert [m.content for m in listed.data] == ["typescript generics", "I write TypeScript daily"]  # newest first

    paged = stubs.memory.ListMemories(pb.ListMemoriesRequest(api_key_id="key-a", limit=1, offset=1))
    assert (len(paged.data), paged.total, paged.page, paged.limit, paged.total_pages) == (1, 3, 2, 1, 3)
    by_page = stubs.memory.ListMemories(pb.ListMemoriesRequest(api_key_id="key-a", limit=2, page=2))
    assert (len(by_page.data), by_page.page) == (1, 2)
    assert stubs.memory.ListMemories(pb.ListMemoriesRequest(session_id="none")).total == 0


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"limit": 201}, "limit"),
        ({"limit": 0}, "limit"),
        ({"page": 0}, "page"),
        ({"offset": -1}, "offset"),
        ({"type": "x"}, "type"),
    ],
)
def test_list_rejects_bad_paging(stubs, fields, field):
    err = _error(stubs.memory.ListMemories, pb.ListMemoriesRequest(**fields))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and _violated_fields(err) == {field}


def test_read_cache_counts_hits_and_is_invalidated_by_writes(stubs):
    created = _create(stubs, content="cached content")
    for _ in range(3):
        stubs.memory.GetMemory(pb.GetMemoryRequest(id=created.id))
    stats = stubs.memory.ListMemories(pb.ListMemoriesRequest()).stats
    assert (stats.cache_stats.hits, stats.cache_stats.misses) == (2, 1) and stats.hit_rate == pytest.approx(2 / 3)
    stubs.memory.UpdateMemory(pb.UpdateMemoryRequest(id=created.id, content="fresh content"))
    assert stubs.memory.GetMemory(pb.GetMemoryRequest(id=created.id)).content == "fresh content"


def test_clear_memories_by_owner_and_filters(stubs):
    old = _create(stubs, content="one", type="episodic")
    _create(stubs, content="two")
    _create(stubs, api_key_id="key-b", content="three")
    cut = stubs.memory.GetMemory(pb.GetMemoryRequest(id=old.id)).created_at
    cut.nanos += 1000
    cleared = stubs.memory.ClearMemories(pb.ClearMemoriesRequest(api_key_id="key-a", older_than=cut))
    assert (cleared.success, cleared.deleted_count) == (True, 1)
    assert stubs.memory.ClearMemories(pb.ClearMemoriesRequest(api_key_id="key-a", type="semantic")).deleted_count == 0
    assert stubs.memory.ClearMemories(pb.ClearMemoriesRequest(api_key_id="key-a")).deleted_count == 1
    assert stubs.memory.ListMemories(pb.ListMemoriesRequest()).total == 1
    err = _error(stubs.memory.ClearMemories, pb.ClearMemoriesRequest())
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and _violated_fields(err) == {"apiKeyId"}


def test_check_health_round_trip_leaves_nothing(server, stubs):
    report = stubs.memory.CheckHealth(pb.CheckHealthRequest())
    assert report.working and report.latency_ms >= 0 and not report.HasField("error")
    assert _row_count(server) == 0


def test_check_health_reports_a_broken_store(server, stubs):
    with server.app.database.write() as conn:
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON memories BEGIN SELECT RAISE(ABORT, 'disk says no'); END")
    report = stubs.memory.CheckHealth(pb.CheckHealthRequest())
    assert not report.working and "disk says no" in report.error


def test_fts_index_follows_insert_update_delete(server, stubs):
    created = _create(stubs, content="I prefer dark mode in my editor")

    def matches(word: str) -> list[int]:
        with server.app.database.read() as conn:
            return [r[0] for r in conn.execute("SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?", (word,))]

    with server.app.database.read() as conn:
        memory_id = conn.execute("SELECT memory_id FROM memories WHERE id = ?", (created.id,)).fetchone()[0]
    assert matches("dark") == [memory_id]
    stubs.memory.UpdateMemory(pb.UpdateMemoryRequest(id=created.id, content="I prefer light themes"))
    assert matches("dark") == [] and matches("light") == [memory_id]
    stubs.memory.DeleteMemory(pb.DeleteMemoryRequest(id=created.id))
    assert matches("light") == []


def test_request_id_is_returned_in_trailers_of_errors(server):
    channel = server.channel()
    call = channel.unary_unary(
        "/memsvc.v1.MemoryService/GetMemory",
        request_serializer=pb.GetMemoryRequest.SerializeToString,
        response_deserializer=pb.Memory.FromString,
    )
    with pytest.raises(grpc.RpcError) as info:
        call(pb.GetMemoryRequest(id="missing"), metadata=(("x-request-id", "req-123"),))
    assert ("x-request-id", "req-123") in tuple(info.value.trailing_metadata())


def test_messages_over_the_configured_size_are_refused(tmp_path):
    from conftest import make_config, start_server

    handle = start_server(make_config(tmp_path, max_message_bytes=64 * 1024))
    try:
        err = _error(handle.stubs().memory.CreateMemory, pb.CreateMemoryRequest(api_key_id="k", content="x" * 70_000))
        assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert handle.stubs().memory.CheckHealth(pb.CheckHealthRequest()).working
    finally:
        handle.stop()
