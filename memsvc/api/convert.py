"""Every conversion between protobuf messages and domain objects, in one module.

Servicers call these and the core; neither builds protobuf messages by hand elsewhere.
Presence matters on the way in: an unset optional field is None, not "" or 0.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from google.protobuf import json_format, struct_pb2, timestamp_pb2
from google.protobuf.message import Message

from memsvc.core.memories import HealthReport, ListQuery, MemoryListing
from memsvc.core.models import Memory, MemoryFilter, NewMemory, UpsertResult
from memsvc.v1 import memory_pb2

# UpdateMemoryRequest fields a client may name, by their JSON names (what REST users see in
# error messages); the core decides which of them may actually change.
_UPDATE_FIELDS = ("type", "key", "content", "metadata", "api_key_id", "session_id", "expires_at",
                  "created_at", "updated_at", "access_count", "last_accessed_at")


# ---- well-known types ----

def _number(value: Any) -> Any:
    """Struct numbers are doubles; keep integral ones as ints so 3 stays 3 in storage."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _number(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_number(v) for v in value]
    return value


def struct_to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    return _number(json_format.MessageToDict(struct))


def dict_to_struct(value: dict[str, Any] | None) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    if value:
        struct.update(value)
    return struct


def value_to_python(value: struct_pb2.Value) -> Any:
    return _number(json_format.MessageToDict(value))


def to_datetime(ts: timestamp_pb2.Timestamp) -> datetime:
    return ts.ToDatetime(tzinfo=timezone.utc)


def to_timestamp(dt: datetime) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(dt)
    return ts


def _optional_time(message: Message, name: str) -> datetime | None:
    return to_datetime(getattr(message, name)) if message.HasField(name) else None


def _optional(message: Message, name: str) -> Any:
    return getattr(message, name) if message.HasField(name) else None


def _json_name(message: Message, name: str) -> str:
    return message.DESCRIPTOR.fields_by_name[name].json_name


# ---- memories ----

def memory_to_pb(m: Memory) -> memory_pb2.Memory:
    pb = memory_pb2.Memory(
        id=m.id, api_key_id=m.api_key_id, type=m.type, content=m.content,
        metadata=dict_to_struct(m.metadata), created_at=to_timestamp(m.created_at),
        updated_at=to_timestamp(m.updated_at), access_count=m.access_count,
    )
    if m.session_id is not None:
        pb.session_id = m.session_id
    if m.key is not None:
        pb.key = m.key
    if m.expires_at is not None:
        pb.expires_at.CopyFrom(to_timestamp(m.expires_at))
    if m.last_accessed_at is not None:
        pb.last_accessed_at.CopyFrom(to_timestamp(m.last_accessed_at))
    return pb


def new_memory_from_pb(req: memory_pb2.CreateMemoryRequest) -> NewMemory:
    return NewMemory(
        api_key_id=req.api_key_id, content=req.content, type=req.type,
        session_id=_optional(req, "session_id"), key=_optional(req, "key"),
        metadata=struct_to_dict(req.metadata), expires_at=_optional_time(req, "expires_at"),
    )


def upsert_to_pb(result: UpsertResult) -> memory_pb2.CreateMemoryResponse:
    return memory_pb2.CreateMemoryResponse(success=True, id=result.id, created=result.created)


def update_changes_from_pb(req: memory_pb2.UpdateMemoryRequest) -> dict[str, Any]:
    """The fields the request sets, keyed by JSON name, values as plain Python."""
    changes: dict[str, Any] = {}
    for name in _UPDATE_FIELDS:
        if not req.HasField(name):
            continue
        value = getattr(req, name)
        if isinstance(value, struct_pb2.Struct):
            value = struct_to_dict(value)
        elif isinstance(value, timestamp_pb2.Timestamp):
            value = to_datetime(value)
        changes[_json_name(req, name)] = value
    return changes


def updated_to_pb(m: Memory) -> memory_pb2.UpdateMemoryResponse:
    return memory_pb2.UpdateMemoryResponse(success=True, memory=memory_to_pb(m))


def list_query_from_pb(req: memory_pb2.ListMemoriesRequest) -> ListQuery:
    flt = MemoryFilter(api_key_id=req.api_key_id or None, session_id=req.session_id or None,
                       type=req.type or None, q=req.q or None)
    return ListQuery(flt, limit=_optional(req, "limit"), page=_optional(req, "page"), offset=_optional(req, "offset"))


def listing_to_pb(listing: MemoryListing) -> memory_pb2.ListMemoriesResponse:
    page = listing.page
    stats = memory_pb2.MemoryStats(
        total=page.total, by_type=page.by_type, tokens_used=page.tokens_used,
        hit_rate=listing.cache.hit_rate,
        cache_stats=memory_pb2.CacheStats(hits=listing.cache.hits, misses=listing.cache.misses,
                                          size=listing.cache.size),
    )
    return memory_pb2.ListMemoriesResponse(
        data=[memory_to_pb(m) for m in page.data], total=page.total, page=listing.page_number,
        limit=listing.limit, total_pages=listing.total_pages, stats=stats,
    )


def clear_filter_from_pb(req: memory_pb2.ClearMemoriesRequest) -> MemoryFilter:
    return MemoryFilter(api_key_id=req.api_key_id or None, session_id=req.session_id or None,
                        type=req.type or None, created_before=_optional_time(req, "older_than"))


def cleared_to_pb(count: int) -> memory_pb2.ClearMemoriesResponse:
    return memory_pb2.ClearMemoriesResponse(success=True, deleted_count=count)


def deleted_to_pb() -> memory_pb2.DeleteMemoryResponse:
    return memory_pb2.DeleteMemoryResponse(success=True)


def health_to_pb(report: HealthReport) -> memory_pb2.CheckHealthResponse:
    pb = memory_pb2.CheckHealthResponse(working=report.working, latency_ms=report.latency_ms)
    if report.error is not None:
        pb.error = report.error
    return pb
