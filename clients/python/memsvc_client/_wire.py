"""Protobuf in and out, shared by the sync and the async client: each request is built here
from the SDK's keyword arguments, each answer becomes the SDK's dataclasses here, so the two
clients differ only in how they wait."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2

from memsvc_client._proto.memsvc.v1 import engine_pb2, memory_pb2, settings_pb2
from memsvc_client.errors import from_status, status_code
from memsvc_client.types import (
    AddResult,
    BatchItem,
    BatchResult,
    ExtractedFact,
    ExtractResult,
    HistoryEntry,
    InjectResult,
    Memory,
    MemoryEvent,
    MemoryHistory,
    MemoryPage,
    MemorySettings,
    MemoryStats,
    NewMemory,
    ReindexProgress,
    Resolution,
    RetrievedMemory,
    RetrieveResult,
)

# The server's bounds (memory.proto): a page holds 1..200 memories.
MAX_PAGE_SIZE = 200
DEFAULT_PAGE_SIZE = 100
# A page of a memory's history holds 1..1000 entries (the server's default: 100).
MAX_HISTORY_PAGE = 1000


# ---- well-known types ------------------------------------------------------------------------


def to_struct(value: Mapping[str, Any], what: str) -> struct_pb2.Struct:
    """A JSON-like mapping as a Struct; anything JSON cannot hold is a TypeError naming `what`
    here, before a call is made."""
    struct = struct_pb2.Struct()
    try:
        struct.update(value)
    except (TypeError, ValueError, AttributeError) as exc:
        raise TypeError(f"{what} must hold only JSON values (dict, list, str, number, bool, None): {exc}") from None
    return struct


def from_struct(struct: struct_pb2.Struct) -> dict[str, Any]:
    return {key: _from_value(value) for key, value in struct.fields.items()}


def _from_value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return from_struct(value.struct_value)
    if kind == "list_value":
        return [_from_value(v) for v in value.list_value.values]
    if kind == "number_value":
        # Struct numbers are doubles: 3 went out as 3.0. JSON has one number type and the
        # server keeps integral numbers as ints too, so 3 comes back as 3 (a provider that
        # wants an integer `max_tokens` in an injected body gets one).
        number = value.number_value
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None


def to_timestamp(value: datetime, what: str) -> timestamp_pb2.Timestamp:
    """A datetime as a Timestamp (a naive datetime is taken as UTC)."""
    if not isinstance(value, datetime):
        raise TypeError(f"{what} must be a datetime, not {type(value).__name__}")
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value if value.tzinfo is not None else value.replace(tzinfo=UTC))
    return ts


def _time(message: Any, name: str) -> datetime | None:
    if not message.HasField(name):
        return None
    value: datetime = getattr(message, name).ToDatetime(tzinfo=UTC)
    return value


def _optional(message: Any, name: str) -> Any:
    return getattr(message, name) if message.HasField(name) else None


def _text(value: str) -> str | None:
    """A proto3 string whose empty value means "none"."""
    return value or None


# ---- requests --------------------------------------------------------------------------------


def create_request(item: NewMemory, owner: str) -> memory_pb2.CreateMemoryRequest:
    if not isinstance(item.content, str):
        raise TypeError(f"content must be a str, not {type(item.content).__name__}")
    request = memory_pb2.CreateMemoryRequest(api_key_id=owner, content=item.content, type=item.type or "")
    if item.session_id is not None:
        request.session_id = item.session_id
    if item.key is not None:
        request.key = item.key
    if item.metadata is not None:
        request.metadata.CopyFrom(to_struct(item.metadata, "metadata"))
    if item.expires_at is not None:
        request.expires_at.CopyFrom(to_timestamp(item.expires_at, "expires_at"))
    if item.occurred_at is not None:
        request.occurred_at.CopyFrom(to_timestamp(item.occurred_at, "occurred_at"))
    if item.keep is not None:
        request.keep = item.keep
    return request


def new_memory(item: NewMemory | str | Mapping[str, Any]) -> NewMemory:
    """An `add_many` item: a NewMemory, a bare content string, or a mapping of NewMemory's
    fields (`{"content": ..., "key": ...}`)."""
    if isinstance(item, NewMemory):
        return item
    if isinstance(item, str):
        return NewMemory(item)
    if isinstance(item, Mapping):
        return NewMemory(**item)
    raise TypeError(f"an add_many item must be a NewMemory, str or mapping, not {type(item).__name__}")


def list_request(
    owner: str, type: str | None, session_id: str | None, query: str | None, offset: int, limit: int
) -> memory_pb2.ListMemoriesRequest:
    return memory_pb2.ListMemoriesRequest(
        api_key_id=owner, type=type or "", session_id=session_id or "", q=query or "", offset=offset, limit=limit
    )


def page_size(value: int) -> int:
    if not isinstance(value, int) or not 1 <= value <= MAX_PAGE_SIZE:
        raise ValueError(f"page_size must be 1..{MAX_PAGE_SIZE}")
    return value


def update_request(
    memory_id: str,
    *,
    content: str | None,
    type: str | None,
    key: str | None,
    metadata: Mapping[str, Any] | None,
    keep: bool | None,
    occurred_at: datetime | None,
) -> memory_pb2.UpdateMemoryRequest:
    request = memory_pb2.UpdateMemoryRequest(id=memory_id)
    if content is not None:
        request.content = content
    if type is not None:
        request.type = type
    if key is not None:
        request.key = key
    if metadata is not None:
        request.metadata.CopyFrom(to_struct(metadata, "metadata"))
    if keep is not None:
        request.keep = keep
    if occurred_at is not None:
        request.occurred_at.CopyFrom(to_timestamp(occurred_at, "occurred_at"))
    return request


def clear_request(
    owner: str, type: str | None, session_id: str | None, older_than: datetime | None
) -> memory_pb2.ClearMemoriesRequest:
    request = memory_pb2.ClearMemoriesRequest(api_key_id=owner, type=type or "", session_id=session_id or "")
    if older_than is not None:
        request.older_than.CopyFrom(to_timestamp(older_than, "older_than"))
    return request


def retrieve_request(
    query: str,
    owner: str,
    *,
    session_id: str | None,
    strategy: str | None,
    scope: str | None,
    max_tokens: int | None,
    limit: int | None,
    min_score: float | None,
    as_of: datetime | None,
) -> engine_pb2.RetrieveRequest:
    request = engine_pb2.RetrieveRequest(
        api_key_id=owner, session_id=session_id or "", query=query, strategy=strategy or "", scope=scope or ""
    )
    if max_tokens is not None:
        request.max_tokens = max_tokens
    if limit is not None:
        request.limit = limit
    if min_score is not None:
        request.min_score = min_score
    if as_of is not None:
        request.as_of.CopyFrom(to_timestamp(as_of, "as_of"))
    return request


def inject_request(
    body: Mapping[str, Any],
    owner: str,
    *,
    provider: str | None,
    model: str | None,
    session_id: str | None,
    limit: int | None,
    min_score: float | None,
    cache_safe: bool,
    system_message_must_be_first: bool,
    no_memory: bool,
    as_of: datetime | None,
) -> engine_pb2.InjectRequest:
    request = engine_pb2.InjectRequest(
        request=to_struct(body, "request"),
        provider=provider or "",
        model=model or "",
        api_key_id=owner,
        session_id=session_id or "",
        no_memory=no_memory,
        options=engine_pb2.InjectOptions(
            cache_safe=cache_safe, system_message_must_be_first=system_message_must_be_first
        ),
    )
    if limit is not None:
        request.limit = limit
    if min_score is not None:
        request.min_score = min_score
    if as_of is not None:
        request.as_of.CopyFrom(to_timestamp(as_of, "as_of"))
    return request


def extract_request(
    owner: str,
    *,
    text: str | None,
    user_message: str | None,
    assistant_message: str | None,
    session_id: str | None,
    dry_run: bool,
    wait: bool,
) -> engine_pb2.ExtractRequest:
    return engine_pb2.ExtractRequest(
        text=text or "",
        user_message=user_message or "",
        assistant_message=assistant_message or "",
        api_key_id=owner,
        session_id=session_id or "",
        dry_run=dry_run,
        wait=wait,
    )


def reindex_request(force: bool, limit: int | None, target: str | None, attach: bool) -> engine_pb2.ReindexRequest:
    return engine_pb2.ReindexRequest(force=force, limit=limit or 0, target=target or "", attach=attach)


def history_page_size(limit: int | None) -> int | None:
    """The entries asked for per GetMemoryHistory call: None (the server's 100) or 1..1000,
    checked before any call."""
    if limit is not None and (
        not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_HISTORY_PAGE
    ):
        raise ValueError(f"limit (entries per page) must be 1..{MAX_HISTORY_PAGE}")
    return limit


def history_request(memory_id: str, limit: int | None, page_token: str) -> memory_pb2.GetMemoryHistoryRequest:
    request = memory_pb2.GetMemoryHistoryRequest(id=memory_id, page_token=page_token)
    if limit is not None:
        request.limit = limit
    return request


def watch_request(owner: str, resume_token: str | None, stop_when_caught_up: bool) -> memory_pb2.WatchMemoriesRequest:
    if resume_token is not None and not isinstance(resume_token, str):
        raise TypeError(f"resume_token must be a str (an event's resume_token), not {type(resume_token).__name__}")
    return memory_pb2.WatchMemoriesRequest(
        api_key_id=owner, resume_token=resume_token or "", stop_when_caught_up=stop_when_caught_up
    )


_SNAKE = re.compile(r"_([a-z0-9])")


def api_name(name: str) -> str:
    """A settings keyword in the server's API spelling: max_tokens -> maxTokens (camelCase
    names pass unchanged)."""
    return _SNAKE.sub(lambda m: m.group(1).upper(), name)


def settings_request(values: Mapping[str, Any]) -> settings_pb2.UpdateMemorySettingsRequest:
    """The strict partial update: each named field as the API spells it. An unknown name is
    sent as given, so the server's refusal names it (and nothing is saved)."""
    patch = {api_name(k): list(v) if isinstance(v, tuple) else v for k, v in values.items()}
    if not patch:
        raise ValueError("settings.update needs at least one setting to change")
    return settings_pb2.UpdateMemorySettingsRequest(settings=to_struct(patch, "settings"))


# ---- answers ---------------------------------------------------------------------------------


def memory(pb: memory_pb2.Memory) -> Memory:
    return Memory(
        id=pb.id,
        api_key_id=pb.api_key_id,
        content=pb.content,
        type=pb.type,
        key=_optional(pb, "key"),
        session_id=_optional(pb, "session_id"),
        metadata=from_struct(pb.metadata),
        created_at=pb.created_at.ToDatetime(tzinfo=UTC),
        updated_at=pb.updated_at.ToDatetime(tzinfo=UTC),
        expires_at=_time(pb, "expires_at"),
        occurred_at=_time(pb, "occurred_at"),
        last_accessed_at=_time(pb, "last_accessed_at"),
        access_count=pb.access_count,
        keep=pb.keep,
        valid_from=_time(pb, "valid_from"),
        valid_to=_time(pb, "valid_to"),
        raw=pb,
    )


def added(pb: memory_pb2.CreateMemoryResponse) -> AddResult:
    return AddResult(id=pb.id, created=pb.created, merged_into=_text(pb.merged_into))


def batch(pb: memory_pb2.CreateMemoriesResponse) -> BatchResult:
    items = []
    for result in pb.results:
        if result.HasField("error") and result.error.code != 0:
            error = from_status(status_code(result.error.code), result.error.message, result.error)
            items.append(BatchItem(id=None, created=False, error=error))
        else:
            items.append(
                BatchItem(id=result.id, created=result.created, error=None, merged_into=_text(result.merged_into))
            )
    return BatchResult(items=tuple(items), stored_count=pb.stored_count, failed_count=pb.failed_count, raw=pb)


def page(pb: memory_pb2.ListMemoriesResponse, offset: int) -> MemoryPage:
    stats = MemoryStats(
        total=pb.stats.total,
        by_type=dict(pb.stats.by_type),
        tokens_used=pb.stats.tokens_used,
        hit_rate=pb.stats.hit_rate,
    )
    memories = tuple(memory(m) for m in pb.data)
    return MemoryPage(memories=memories, total=pb.total, offset=offset, limit=pb.limit, stats=stats, raw=pb)


def resolution(pb: engine_pb2.Resolution) -> Resolution:
    return Resolution(
        embedding_source=pb.embedding_source,
        embedding_model=pb.embedding_model,
        vector_store=pb.vector_store,
        strategy_used=pb.strategy_used,
        rerank_applied=pb.rerank_applied,
        fallback_reason=pb.fallback_reason,
        backend=pb.backend,
        below_min_score=pb.below_min_score,
        keyword_floor=pb.keyword_floor,
        vector_floor=pb.vector_floor,
        skipped_for_age=pb.skipped_for_age,
    )


def retrieved(pb: engine_pb2.RetrievedMemory) -> RetrievedMemory:
    return RetrievedMemory(
        id=pb.id,
        content=pb.content,
        type=pb.type,
        key=pb.key or None,
        session_id=pb.session_id or None,
        score=pb.score,
        tokens=pb.tokens,
        tier=pb.tier,
        vec_score=_optional(pb, "vec_score"),
        fts_score=_optional(pb, "fts_score"),
        occurred_at=_time(pb, "occurred_at"),
        valid_from=_time(pb, "valid_from"),
        valid_to=_time(pb, "valid_to"),
    )


def retrieve_result(pb: engine_pb2.RetrieveResponse) -> RetrieveResult:
    return RetrieveResult(
        memories=tuple(retrieved(m) for m in pb.memories),
        total_tokens=pb.total_tokens,
        resolution=resolution(pb.resolution),
        raw=pb,
    )


def inject_result(pb: engine_pb2.InjectResponse) -> InjectResult:
    return InjectResult(
        request=from_struct(pb.request),
        injected=pb.injected,
        memory_ids=tuple(pb.memory_ids),
        tokens=pb.tokens,
        role=pb.role,
        format=pb.format,
        skipped_reason=pb.skipped_reason,
        below_min_score=pb.below_min_score,
        skipped_for_age=pb.skipped_for_age,
        raw=pb,
    )


def extract_result(pb: engine_pb2.ExtractResponse) -> ExtractResult:
    facts = tuple(ExtractedFact(category=f.category, type=f.type, key=f.key, content=f.content) for f in pb.facts)
    return ExtractResult(facts=facts, stored=pb.stored, accepted=pb.accepted, skipped_reason=pb.skipped_reason, raw=pb)


def progress(pb: engine_pb2.ReindexProgress) -> ReindexProgress:
    return ReindexProgress(
        started=pb.started,
        pending=pb.pending,
        processed=pb.processed,
        errors=pb.errors,
        rate_per_second=pb.rate_per_second,
        eta_seconds=pb.eta_seconds,
        state=pb.state,
        error=pb.error,
        raw=pb,
    )


def memory_settings(pb: settings_pb2.MemorySettings) -> MemorySettings:
    return MemorySettings(
        enabled=pb.enabled,
        max_tokens=pb.max_tokens,
        retention_days=pb.retention_days,
        strategy=pb.strategy,
        scope=pb.scope,
        skills_enabled=pb.skills_enabled,
        embedding_source=pb.embedding_source,
        embedding_provider_model=_optional(pb, "embedding_provider_model"),
        custom_base_url=_optional(pb, "custom_base_url"),
        custom_model_id=_optional(pb, "custom_model_id"),
        transformers_enabled=pb.transformers_enabled,
        static_enabled=pb.static_enabled,
        rerank_enabled=pb.rerank_enabled,
        rerank_provider_model=_optional(pb, "rerank_provider_model"),
        vector_store=pb.vector_store,
        primary_backend=pb.primary_backend,
        fallback_backends=tuple(pb.fallback_backends),
        backend_configs=from_struct(pb.backend_configs),
        dedup_on_write=pb.dedup_on_write,
        raw=pb,
    )


def history_entry(pb: memory_pb2.MemoryHistoryEntry) -> HistoryEntry:
    return HistoryEntry(
        event=pb.event,
        at=pb.at.ToDatetime(tzinfo=UTC),
        author=_text(pb.author),
        changes=from_struct(pb.changes),
        related_id=_text(pb.related_id),
        raw=pb,
    )


class HistoryPages:
    """The state of reading a memory's history page by page (both clients' iterators): the
    entries fetched and not yet handed out, those handed out, and the next page's token."""

    def __init__(self) -> None:
        self._token: str | None = ""  # the next page's token; None once the last page arrived
        self._pending: deque[HistoryEntry] = deque()
        self._seen: list[HistoryEntry] = []
        self.id: str | None = None
        self.api_key_id: str | None = None
        self.versions: tuple[Memory, ...] | None = None

    def next_token(self) -> str | None:
        """The page to fetch before the next entry can be handed out, or None."""
        return self._token if not self._pending else None

    def take(self, pb: memory_pb2.GetMemoryHistoryResponse) -> None:
        self._token = pb.next_page_token or None
        self._pending.extend(history_entry(e) for e in pb.entries)
        self.id, self.api_key_id = pb.id, pb.api_key_id
        self.versions = tuple(memory(v) for v in pb.versions)

    def pop(self) -> HistoryEntry | None:
        """The next entry, or None at the end."""
        if not self._pending:
            return None
        entry = self._pending.popleft()
        self._seen.append(entry)
        return entry

    def history(self) -> MemoryHistory:
        if self.id is None or self.api_key_id is None or self.versions is None:  # pragma: no cover
            raise RuntimeError("no page of the history was read")
        return MemoryHistory(id=self.id, api_key_id=self.api_key_id, entries=tuple(self._seen), versions=self.versions)


def memory_event(pb: memory_pb2.MemoryEvent) -> MemoryEvent:
    return MemoryEvent(
        kind=pb.kind,
        resume_token=pb.resume_token,
        memory_id=_text(pb.memory_id),
        api_key_id=_text(pb.api_key_id),
        at=_time(pb, "at"),
        author=_text(pb.author),
        change=_text(pb.change),
        changed_fields=tuple(pb.changed_fields),
        memory=memory(pb.memory) if pb.HasField("memory") else None,
        related_id=_text(pb.related_id),
        raw=pb,
    )
