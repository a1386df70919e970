"""Every conversion between protobuf messages and domain objects, in one module.

Servicers call these and the core; neither builds protobuf messages by hand elsewhere.
Presence matters on the way in: an unset optional field is None, not "" or 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2
from google.protobuf.message import Message

from memsvc.api import errors
from memsvc.characters.models import (
    AppendResult,
    ChatItem,
    LegacyScan,
    PurgeResult,
    RecentSnapshot,
    RenameRequest,
    RenameResult,
    SaveRequest,
    SaveResult,
)
from memsvc.core.backend_manager import BackendStatus
from memsvc.core.change_feed import Bookmark
from memsvc.core.credentials import OPEN_CALLER, Credential, IssuedCredential
from memsvc.core.engine import ExtractCall, ExtractOutcome, InjectCall, InjectOutcome
from memsvc.core.injection.inject import InjectOptions
from memsvc.core.introspection import EmbeddingStatus, QdrantHit
from memsvc.core.memories import HealthReport, ListQuery, MemoryHistory, MemoryListing, check_batch_size
from memsvc.core.reindex import Progress, ReindexStatus
from memsvc.core.retrieval.ranking import Resolution, RetrievalResult, RetrievedItem
from memsvc.core.retrieval.relevance_floor import FlooredResult
from memsvc.core.settings.memory import MemorySettings
from memsvc.core.settings.qdrant import QdrantSettings, mask_api_key
from memsvc.core.summarization import BudgetOutcome, SummaryOutcome
from memsvc.kernel.changes import FeedEvent, MemoryChange
from memsvc.kernel.errors import ValidationError
from memsvc.kernel.models import Memory, MemoryFilter, NewMemory, UpsertResult, estimate_tokens
from memsvc.v1 import credentials_pb2, engine_pb2, memory_pb2, settings_pb2

# UpdateMemoryRequest fields a client may name, by their JSON names (what REST users see in
# error messages); the core decides which of them may actually change.
_UPDATE_FIELDS = (
    "type",
    "key",
    "content",
    "metadata",
    "keep",
    "occurred_at",
    "api_key_id",
    "session_id",
    "expires_at",
    "created_at",
    "updated_at",
    "access_count",
    "last_accessed_at",
)


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


# Free-form JSON (metadata, settings, chat bodies) may nest objects and arrays this deep: a
# bound that every stored value can be read back within, since protobuf's decoder refuses
# messages nested past 100 levels and each JSON object costs three of them.
MAX_JSON_DEPTH = 32
TOO_DEEP = f"is nested deeper than {MAX_JSON_DEPTH} levels of objects and arrays"


def value_to_python(value: struct_pb2.Value, field: str = "value", depth: int = 0) -> Any:
    """Walked by hand rather than json_format.MessageToDict, which raises on NaN and
    Infinity: those must reach validation and become a 400, not crash the call. `depth` is
    how many objects and arrays enclose `value` in the request field `field`."""
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return struct_to_dict(value.struct_value, field, depth)
    if kind == "list_value":
        _check_depth(field, depth + 1)
        return [value_to_python(v, field, depth + 1) for v in value.list_value.values]
    if kind == "number_value":
        return _number(value.number_value)
    if kind in ("string_value", "bool_value"):
        return getattr(value, kind)
    return None


def _check_depth(field: str, depth: int) -> None:
    if depth > MAX_JSON_DEPTH:
        raise ValidationError.single(field, TOO_DEEP)


def struct_to_dict(struct: struct_pb2.Struct, field: str = "value", depth: int = 0) -> dict[str, Any]:
    """The Struct as a dict; `field` names it in the refusal when it nests too deep."""
    _check_depth(field, depth + 1)
    return {key: value_to_python(v, field, depth + 1) for key, v in struct.fields.items()}


def dict_to_struct(value: Mapping[str, Any] | None) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    if value:
        struct.update(value)
    return struct


def to_datetime(ts: timestamp_pb2.Timestamp) -> datetime:
    return ts.ToDatetime(tzinfo=UTC)


def _valid_time(ts: timestamp_pb2.Timestamp, field_name: str) -> datetime:
    """A Timestamp outside 0001..9999 or with bad nanos is bad input, not a crash."""
    try:
        return to_datetime(ts)
    except (ValueError, OverflowError):
        raise ValidationError.single(field_name, "is not a valid timestamp (years 0001-9999)") from None


def to_timestamp(dt: datetime) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(dt)
    return ts


def _optional_time(message: Message, name: str) -> datetime | None:
    return _valid_time(getattr(message, name), _json_name(message, name)) if message.HasField(name) else None


def optional(message: Message, name: str) -> Any:
    """The field's value when set, None when unset (presence-tracked fields only)."""
    return getattr(message, name) if message.HasField(name) else None


def _json_name(message: Message, name: str) -> str:
    return message.DESCRIPTOR.fields_by_name[name].json_name


# ---- memories ----


def memory_to_pb(m: Memory) -> memory_pb2.Memory:
    pb = memory_pb2.Memory(
        id=m.id,
        api_key_id=m.api_key_id,
        type=m.type,
        content=m.content,
        metadata=dict_to_struct(m.metadata),
        created_at=to_timestamp(m.created_at),
        updated_at=to_timestamp(m.updated_at),
        access_count=m.access_count,
        keep=m.keep,
    )
    if m.session_id is not None:
        pb.session_id = m.session_id
    if m.key is not None:
        pb.key = m.key
    if m.expires_at is not None:
        pb.expires_at.CopyFrom(to_timestamp(m.expires_at))
    if m.last_accessed_at is not None:
        pb.last_accessed_at.CopyFrom(to_timestamp(m.last_accessed_at))
    if m.occurred_at is not None:
        pb.occurred_at.CopyFrom(to_timestamp(m.occurred_at))
    _validity_to_pb(pb, m)
    return pb


def _validity_to_pb(pb: memory_pb2.Memory | engine_pb2.RetrievedMemory, m: Memory) -> None:
    pb.valid_from.CopyFrom(to_timestamp(m.valid_since))
    if m.valid_to is not None:
        pb.valid_to.CopyFrom(to_timestamp(m.valid_to))


def new_memory_from_pb(req: memory_pb2.CreateMemoryRequest) -> NewMemory:
    return NewMemory(
        api_key_id=req.api_key_id,
        content=req.content,
        type=req.type,
        session_id=optional(req, "session_id"),
        key=optional(req, "key"),
        metadata=struct_to_dict(req.metadata, "metadata"),
        expires_at=_optional_time(req, "expires_at"),
        keep=optional(req, "keep"),
        occurred_at=_optional_time(req, "occurred_at"),
    )


def upsert_to_pb(result: UpsertResult) -> memory_pb2.CreateMemoryResponse:
    return memory_pb2.CreateMemoryResponse(
        success=True, id=result.id, created=result.created, merged_into=result.id if result.merged else ""
    )


def new_memories_from_pb(req: memory_pb2.CreateMemoriesRequest) -> list[NewMemory | ValidationError]:
    """Each item as `new_memory_from_pb` reads it; an item that cannot be read (metadata
    nested too deep, a timestamp out of range) is its ValidationError, reported in its own
    result, so one bad item does not refuse the others."""
    check_batch_size(len(req.memories))  # before reading 10^5 items only to refuse them
    out: list[NewMemory | ValidationError] = []
    for item in req.memories:
        try:
            out.append(new_memory_from_pb(item))
        except ValidationError as exc:
            out.append(exc)
    return out


def create_memory_result_to_pb(outcome: UpsertResult | Exception) -> memory_pb2.CreateMemoryResult:
    if isinstance(outcome, UpsertResult):
        return memory_pb2.CreateMemoryResult(
            success=True, id=outcome.id, created=outcome.created, merged_into=outcome.id if outcome.merged else ""
        )
    return memory_pb2.CreateMemoryResult(success=False, error=errors.item_status(outcome, "CreateMemories"))


def created_memories_to_pb(outcomes: Sequence[UpsertResult | Exception]) -> memory_pb2.CreateMemoriesResponse:
    results = [create_memory_result_to_pb(o) for o in outcomes]
    stored = sum(1 for r in results if r.success)
    return memory_pb2.CreateMemoriesResponse(results=results, stored_count=stored, failed_count=len(results) - stored)


def update_changes_from_pb(req: memory_pb2.UpdateMemoryRequest) -> dict[str, Any]:
    """The fields the request sets, keyed by JSON name, values as plain Python."""
    changes: dict[str, Any] = {}
    for name in _UPDATE_FIELDS:
        if not req.HasField(name):
            continue
        value = getattr(req, name)
        if isinstance(value, struct_pb2.Struct):
            value = struct_to_dict(value, _json_name(req, name))
        elif isinstance(value, timestamp_pb2.Timestamp):
            value = _valid_time(value, _json_name(req, name))
        changes[_json_name(req, name)] = value
    return changes


def updated_to_pb(m: Memory) -> memory_pb2.UpdateMemoryResponse:
    return memory_pb2.UpdateMemoryResponse(success=True, memory=memory_to_pb(m))


def list_query_from_pb(req: memory_pb2.ListMemoriesRequest) -> ListQuery:
    flt = MemoryFilter(
        api_key_id=req.api_key_id or None, session_id=req.session_id or None, type=req.type or None, q=req.q or None
    )
    return ListQuery(flt, limit=optional(req, "limit"), page=optional(req, "page"), offset=optional(req, "offset"))


def listing_to_pb(listing: MemoryListing) -> memory_pb2.ListMemoriesResponse:
    page = listing.page
    stats = memory_pb2.MemoryStats(
        total=page.total,
        by_type=page.by_type,
        tokens_used=page.tokens_used,
        hit_rate=listing.cache.hit_rate,
        cache_stats=memory_pb2.CacheStats(
            hits=listing.cache.hits, misses=listing.cache.misses, size=listing.cache.size
        ),
    )
    return memory_pb2.ListMemoriesResponse(
        data=[memory_to_pb(m) for m in page.data],
        total=page.total,
        page=listing.page_number,
        limit=listing.limit,
        total_pages=listing.total_pages,
        stats=stats,
    )


def clear_filter_from_pb(req: memory_pb2.ClearMemoriesRequest) -> MemoryFilter:
    return MemoryFilter(
        api_key_id=req.api_key_id or None,
        session_id=req.session_id or None,
        type=req.type or None,
        created_before=_optional_time(req, "older_than"),
    )


def cleared_to_pb(count: int) -> memory_pb2.ClearMemoriesResponse:
    return memory_pb2.ClearMemoriesResponse(success=True, deleted_count=count)


def deleted_to_pb() -> memory_pb2.DeleteMemoryResponse:
    return memory_pb2.DeleteMemoryResponse(success=True)


def history_to_pb(history: MemoryHistory) -> memory_pb2.GetMemoryHistoryResponse:
    return memory_pb2.GetMemoryHistoryResponse(
        id=history.memory_id,
        api_key_id=history.api_key_id,
        entries=[history_entry_to_pb(c) for c in history.entries],
        versions=[memory_to_pb(v) for v in history.versions],
        next_page_token=history.next_page_token,
    )


def history_entry_to_pb(change: MemoryChange) -> memory_pb2.MemoryHistoryEntry:
    pb = memory_pb2.MemoryHistoryEntry(
        event=change.event,
        at=to_timestamp(change.at),
        author=change.author,
        changes=dict_to_struct(change.changes),
        related_id=change.related or "",
    )
    return pb


def memory_event_to_pb(item: FeedEvent | Bookmark) -> memory_pb2.MemoryEvent:
    """A change of the feed, or a bookmark (the position alone)."""
    if isinstance(item, Bookmark):
        return memory_pb2.MemoryEvent(kind="bookmark", resume_token=item.token)
    change = item.change
    pb = memory_pb2.MemoryEvent(
        kind=item.kind,
        resume_token=item.token,
        memory_id=change.memory_id,
        api_key_id=change.api_key_id,
        at=to_timestamp(change.at),
        author=change.author,
        change=change.event,
        changed_fields=sorted(change.changes),
        related_id=change.related or "",
    )
    if item.memory is not None:
        pb.memory.CopyFrom(memory_to_pb(item.memory))
    return pb


def health_to_pb(report: HealthReport) -> memory_pb2.CheckHealthResponse:
    pb = memory_pb2.CheckHealthResponse(working=report.working, latency_ms=report.latency_ms)
    if report.error is not None:
        pb.error = report.error
    return pb


# ---- settings ----


def settings_to_pb(s: MemorySettings) -> settings_pb2.MemorySettings:
    pb = settings_pb2.MemorySettings(
        enabled=s.enabled,
        max_tokens=s.max_tokens,
        retention_days=s.retention_days,
        strategy=s.strategy,
        scope=s.scope,
        skills_enabled=s.skills_enabled,
        embedding_source=s.embedding_source,
        transformers_enabled=s.transformers_enabled,
        static_enabled=s.static_enabled,
        rerank_enabled=s.rerank_enabled,
        vector_store=s.vector_store,
        primary_backend=s.primary_backend,
        fallback_backends=list(s.fallback_backends),
        backend_configs=dict_to_struct(s.public_backend_configs()),
        dedup_on_write=s.dedup_on_write,
    )
    for name in ("embedding_provider_model", "custom_base_url", "custom_model_id", "rerank_provider_model"):
        value = getattr(s, name)
        if value is not None:
            setattr(pb, name, value)
    return pb


def settings_patch_from_pb(req: settings_pb2.UpdateMemorySettingsRequest) -> dict[str, Any]:
    return struct_to_dict(req.settings, "settings")


# ---- engine ----


def retrieved_to_pb(item: RetrievedItem) -> engine_pb2.RetrievedMemory:
    m = item.memory
    pb = engine_pb2.RetrievedMemory(
        id=m.id,
        type=m.type,
        key=m.key or "",
        content=m.content,
        score=item.score,
        tokens=item.tokens,
        tier=item.tier,
        session_id=m.session_id or "",
    )
    if item.vec_score is not None:
        pb.vec_score = item.vec_score
    if item.fts_score is not None:
        pb.fts_score = item.fts_score
    if m.occurred_at is not None:
        pb.occurred_at.CopyFrom(to_timestamp(m.occurred_at))
    _validity_to_pb(pb, m)
    return pb


def resolution_to_pb(r: Resolution) -> engine_pb2.Resolution:
    return engine_pb2.Resolution(
        embedding_source=r.embedding_source,
        embedding_model=r.embedding_model,
        vector_store=r.vector_store,
        strategy_used=r.strategy_used,
        rerank_applied=r.rerank_applied,
        fallback_reason=r.fallback_reason,
        backend=r.backend,
        skipped_for_age=r.skipped_for_age,
    )


def retrieve_args_from_pb(req: engine_pb2.RetrieveRequest) -> dict[str, Any]:
    """An unset minScore is None: the engine's default relevance floor."""
    return dict(
        api_key_id=req.api_key_id,
        query=req.query,
        session_id=req.session_id,
        strategy=req.strategy,
        max_tokens=optional(req, "max_tokens"),
        scope=req.scope,
        limit=optional(req, "limit"),
        min_score=optional(req, "min_score"),
        as_of=_optional_time(req, "as_of"),
    )


def retrieval_to_pb(result: FlooredResult) -> engine_pb2.RetrieveResponse:
    resolution = resolution_to_pb(result.resolution)
    resolution.below_min_score = result.below_min_score
    resolution.keyword_floor, resolution.vector_floor = result.floor.keyword, result.floor.vector
    return engine_pb2.RetrieveResponse(
        memories=[retrieved_to_pb(i) for i in result.items], total_tokens=result.total_tokens, resolution=resolution
    )


def preview_args_from_pb(req: engine_pb2.RetrievePreviewRequest) -> dict[str, Any]:
    return dict(
        query=req.query,
        api_key_id=req.api_key_id,
        session_id=req.session_id,
        strategy=req.strategy,
        max_tokens=optional(req, "max_tokens"),
        limit=optional(req, "limit"),
        as_of=_optional_time(req, "as_of"),
    )


def preview_to_pb(result: RetrievalResult) -> engine_pb2.RetrievePreviewResponse:
    return engine_pb2.RetrievePreviewResponse(
        memories=[retrieved_to_pb(i) for i in result.items],
        resolution=resolution_to_pb(result.resolution),
        total_tokens_used=result.total_tokens,
        budget_max_tokens=result.budget,
    )


def inject_call_from_pb(req: engine_pb2.InjectRequest, metadata: Sequence[tuple[str, str]]) -> InjectCall:
    return InjectCall(
        body=struct_to_dict(req.request, "request"),
        provider=req.provider,
        model=req.model,
        api_key_id=req.api_key_id,
        session_id=req.session_id,
        no_memory=req.no_memory,
        options=InjectOptions(
            cache_safe=req.options.cache_safe, system_message_must_be_first=req.options.system_message_must_be_first
        ),
        headers=tuple(metadata),
        limit=optional(req, "limit"),
        min_score=optional(req, "min_score"),
        as_of=_optional_time(req, "as_of"),
    )


def injected_to_pb(outcome: InjectOutcome) -> engine_pb2.InjectResponse:
    return engine_pb2.InjectResponse(
        request=dict_to_struct(outcome.injection.body),
        injected=outcome.injection.injected,
        memory_ids=outcome.memory_ids,
        tokens=outcome.tokens,
        role=outcome.injection.role or "",
        skipped_reason=outcome.skipped_reason,
        format=outcome.injection.format or "",
        below_min_score=outcome.below_min_score,
        skipped_for_age=outcome.skipped_for_age,
    )


def extract_call_from_pb(req: engine_pb2.ExtractRequest, metadata: Sequence[tuple[str, str]]) -> ExtractCall:
    return ExtractCall(
        text=req.text,
        user_message=req.user_message,
        assistant_message=req.assistant_message,
        api_key_id=req.api_key_id,
        session_id=req.session_id,
        dry_run=req.dry_run,
        wait=req.wait,
        no_memory=req.no_memory,
        headers=tuple(metadata),
    )


def extracted_to_pb(outcome: ExtractOutcome) -> engine_pb2.ExtractResponse:
    facts = [
        engine_pb2.ExtractedFact(category=f.category, type=f.type, key=f.key, content=f.content) for f in outcome.facts
    ]
    return engine_pb2.ExtractResponse(
        facts=facts, stored=outcome.stored, accepted=outcome.accepted, skipped_reason=outcome.skipped_reason
    )


def summary_to_pb(outcome: SummaryOutcome) -> engine_pb2.SummarizeResponse:
    pb = engine_pb2.SummarizeResponse(
        candidates=[
            engine_pb2.SummaryCandidate(
                id=m.id, type=m.type, key=m.key or "", api_key_id=m.api_key_id, tokens=estimate_tokens(m.content)
            )
            for m in outcome.candidates
        ],
        total_tokens=outcome.total_tokens,
        tokens_saved=outcome.tokens_saved,
        deleted_count=outcome.deleted_count,
        dry_run=outcome.dry_run,
        summary_ids=outcome.summary_ids,
    )
    if outcome.summary_ids:
        pb.summary_id = outcome.summary_ids[0]
    return pb


def budget_summary_to_pb(outcome: BudgetOutcome) -> engine_pb2.SummarizeResponse:
    return engine_pb2.SummarizeResponse(
        original_count=outcome.original_count,
        summarized_count=outcome.summarized_count,
        tokens_saved=outcome.tokens_saved,
    )


# ---- vectors: engine status, providers, reindex, qdrant ----


def embedding_status_to_pb(emb: EmbeddingStatus) -> engine_pb2.EmbeddingStatus:
    cache = emb.cache_stats
    return engine_pb2.EmbeddingStatus(
        source=emb.source,
        model=emb.model or "",
        dimensions=emb.dimensions or 0,
        available=emb.available,
        reason=emb.reason or "",
        loaded=emb.loaded,
        signature=emb.signature or "",
        state=emb.state,
        phase=emb.phase,
        progress=emb.progress or 0.0,
        cache_stats=engine_pb2.EmbeddingCacheStats(hits=cache["hits"], misses=cache["misses"], size=cache["size"]),
    )


def engine_status_to_pb(status: dict[str, Any]) -> engine_pb2.EngineStatus:
    emb, vec, qd, rr = status["embedding"], status["vector_store"], status["qdrant"], status["rerank"]
    return engine_pb2.EngineStatus(
        keyword=engine_pb2.KeywordStatus(**status["keyword"]),
        embedding=embedding_status_to_pb(emb),
        vector_store=engine_pb2.VectorStoreStatus(
            backend=vec["backend"],
            available=vec["available"],
            row_count=vec["row_count"],
            needs_reindex=vec["needs_reindex"],
            reason=vec["reason"],
            signature=vec["signature"] or "",
        ),
        qdrant=engine_pb2.QdrantStatus(
            enabled=qd["enabled"], healthy=qd["healthy"], latency_ms=int(round(qd["latency_ms"])), error=qd["error"]
        ),
        rerank=engine_pb2.RerankStatus(
            enabled=rr["enabled"],
            provider=rr["provider"] or "",
            model=rr["model"] or "",
            available=rr["available"],
            reason=rr["reason"] or "",
        ),
        retrieval=engine_pb2.RetrievalStatus(**status["retrieval"]),
        backends=[backend_status_to_pb(b) for b in status.get("backends", [])],
        reindex=reindex_status_to_pb(status["reindex"]),
        working_sets=(
            engine_pb2.WorkingSetStatus(**status["working_sets"]) if status.get("working_sets") is not None else None
        ),
    )


def reindex_status_to_pb(r: ReindexStatus) -> engine_pb2.ReindexStatus:
    pb = engine_pb2.ReindexStatus(running=r.running, target=r.target, holder=r.holder)
    if r.progress is not None:
        pb.progress.CopyFrom(progress_to_pb(r.progress))
    return pb


def backend_status_to_pb(b: BackendStatus) -> engine_pb2.BackendStatus:
    pb = engine_pb2.BackendStatus(
        name=b.name,
        type=b.kind,
        role=b.role,
        healthy=b.healthy,
        latency_ms=b.latency_ms,
        error=b.error,
        pending_syncs=b.pending_syncs,
    )
    if b.checked_at is not None:
        pb.checked_at.CopyFrom(to_timestamp(b.checked_at))
    return pb


def _models_pb(models: list[dict[str, Any]]) -> list[engine_pb2.EmbeddingModel]:
    return [engine_pb2.EmbeddingModel(id=m["id"], name=m["name"], dimensions=m["dimensions"] or 0) for m in models]


def providers_to_pb(providers: list[dict[str, Any]]) -> engine_pb2.ListEmbeddingProvidersResponse:
    return engine_pb2.ListEmbeddingProvidersResponse(
        providers=[
            engine_pb2.EmbeddingProvider(
                provider=p["provider"], has_key=p["has_key"], kind=p.get("kind", ""), models=_models_pb(p["models"])
            )
            for p in providers
        ]
    )


def progress_to_pb(p: Progress) -> engine_pb2.ReindexProgress:
    return engine_pb2.ReindexProgress(
        started=p.started,
        pending=p.pending,
        processed=p.processed,
        errors=p.errors,
        rate_per_second=p.rate_per_second,
        eta_seconds=p.eta_seconds,
        state=p.state,
        error=p.error,
    )


def qdrant_settings_to_pb(s: QdrantSettings) -> settings_pb2.QdrantSettings:
    return settings_pb2.QdrantSettings(
        enabled=s.enabled,
        host=s.host,
        port=s.port,
        collection=s.collection,
        embedding_model=s.embedding_model,
        has_api_key=s.has_api_key,
        api_key_masked=mask_api_key(s.api_key) or "",
        quantization=s.quantization,
        local_path=s.local_path or "",
    )


def qdrant_health_to_pb(h: dict[str, Any]) -> settings_pb2.QdrantHealth:
    return settings_pb2.QdrantHealth(
        ok=h["ok"],
        latency_ms=float(h["latency_ms"] or 0),
        error=h["error"] or "",
        collection_exists=h["collection_exists"],
        points_count=h["points_count"],
        mode=h.get("mode", ""),
    )


def qdrant_hits_to_pb(hits: list[QdrantHit], latency_ms: float) -> settings_pb2.SearchQdrantResponse:
    return settings_pb2.SearchQdrantResponse(
        latency_ms=int(round(latency_ms)),
        results=[
            settings_pb2.QdrantHit(
                id=h.id, score=h.score, api_key_id=h.api_key_id, session_id=h.session_id, key=h.key, content=h.content
            )
            for h in hits
        ],
    )


def qdrant_models_to_pb(models: list[dict[str, Any]]) -> settings_pb2.ListQdrantEmbeddingModelsResponse:
    return settings_pb2.ListQdrantEmbeddingModelsResponse(
        models=[
            settings_pb2.QdrantEmbeddingModel(
                id=m["id"], name=m["name"], dimensions=m["dimensions"] or 0, provider=m["provider"]
            )
            for m in models
        ]
    )


def metadata_pairs(metadata: Iterable[Any] | None) -> tuple[tuple[str, str], ...]:
    """Invocation metadata as (key, text) pairs; binary (-bin) values are skipped."""
    pairs = []
    for item in metadata or ():
        key, value = (item.key, item.value) if hasattr(item, "key") else item
        if isinstance(value, str):
            pairs.append((key, value))
    return tuple(pairs)


# ---- character memory ----

# The compatibility alias of RenameCharacter; Envoy forwards the path the client used as
# `x-envoy-original-path` metadata, which is how the two REST routes are told apart.
RENAME_ALIAS_PATH = "/api/memory/update_catgirl_name"
ORIGINAL_PATH_HEADER = "x-envoy-original-path"


def chat_items_from_pb(items: Sequence[memory_pb2.ChatItem]) -> list[ChatItem]:
    return [
        ChatItem(
            role=optional(i, "role"),
            text=optional(i, "text"),
            source_index=optional(i, "source_index"),
            theater=i.theater,
        )
        for i in items
    ]


def recent_files_to_pb(files: list[str]) -> memory_pb2.ListRecentFilesResponse:
    return memory_pb2.ListRecentFilesResponse(files=files)


def snapshot_to_pb(s: RecentSnapshot) -> memory_pb2.GetRecentFileResponse:
    return memory_pb2.GetRecentFileResponse(
        content=s.content, fingerprint=s.fingerprint, identity_token=s.identity_token
    )


def save_request_from_pb(req: memory_pb2.SaveRecentFileRequest) -> SaveRequest:
    return SaveRequest(
        filename=req.filename,
        fingerprint=optional(req, "fingerprint"),
        identity_token=optional(req, "identity_token"),
        chat=chat_items_from_pb(req.chat),
    )


def saved_to_pb(r: SaveResult) -> memory_pb2.SaveRecentFileResponse:
    return memory_pb2.SaveRecentFileResponse(
        success=True,
        need_refresh=True,
        catgirl_name=r.catgirl_name,
        fingerprint=r.fingerprint,
        identity_token=r.identity_token,
    )


def appended_to_pb(r: AppendResult) -> memory_pb2.AppendRecentMessagesResponse:
    return memory_pb2.AppendRecentMessagesResponse(success=True, accepted=r.accepted, pending=r.pending)


def rename_request_from_pb(
    req: memory_pb2.RenameCharacterRequest, metadata: Sequence[tuple[str, str]]
) -> RenameRequest:
    original = next((v for k, v in metadata if k == ORIGINAL_PATH_HEADER), None)
    alias = req.compat_alias if original is None else original.split("?", 1)[0] == RENAME_ALIAS_PATH
    return RenameRequest(old_name=req.old_name, new_name=req.new_name, alias=alias)


def renamed_to_pb(r: RenameResult) -> memory_pb2.RenameCharacterResponse:
    if r.changed:
        return memory_pb2.RenameCharacterResponse(success=True, memory_renamed=True, memory_server_reloaded=True)
    return memory_pb2.RenameCharacterResponse(
        success=True, changed=False, already_renamed=r.already_renamed, exists_after=r.exists_after
    )


def legacy_scan_to_pb(s: LegacyScan) -> memory_pb2.ScanLegacyResponse:
    roots = [
        memory_pb2.LegacyRoot(
            root=r.root,
            source=r.source,
            exists=r.exists,
            entries=[
                memory_pb2.LegacyEntry(
                    name=e.name,
                    path=e.path,
                    is_dir=e.is_dir,
                    size_bytes=e.size_bytes,
                    is_unlinked=e.is_unlinked,
                    runtime_has_same_name=e.runtime_has_same_name,
                )
                for e in r.entries
            ],
        )
        for r in s.roots
    ]
    return memory_pb2.ScanLegacyResponse(
        success=True,
        legacy_roots=roots,
        runtime_memory_dir=s.runtime_memory_dir,
        total_entries=s.total_entries,
        total_size_bytes=s.total_size_bytes,
    )


def purge_paths_from_pb(req: memory_pb2.PurgeLegacyRequest) -> list[Any]:
    return [value_to_python(v, "paths", 1) for v in req.paths]


def purged_to_pb(r: PurgeResult) -> memory_pb2.PurgeLegacyResponse:
    return memory_pb2.PurgeLegacyResponse(
        success=True, removed=r.removed, errors=[memory_pb2.PurgeError(path=e.path, error=e.error) for e in r.errors]
    )


def toggle_to_pb(enabled: bool) -> settings_pb2.ToggleConfig:
    return settings_pb2.ToggleConfig(enabled=enabled)


def toggle_value_from_pb(req: settings_pb2.SetToggleRequest) -> Any:
    """The JSON value sent as `enabled` (None when absent); the core insists on a boolean."""
    return value_to_python(req.enabled, "enabled") if req.HasField("enabled") else None


def toggle_set_to_pb(enabled: bool) -> settings_pb2.SetToggleResponse:
    return settings_pb2.SetToggleResponse(success=True, enabled=enabled)


# ---- credentials ----


def credential_to_pb(c: Credential) -> credentials_pb2.Credential:
    out = credentials_pb2.Credential(
        id=c.id, permissions=sorted(c.permissions), tenants=c.tenant_list(), characters=c.characters
    )
    if c.created_at is not None:
        out.created_at.CopyFrom(to_timestamp(c.created_at))
    if c.revoked_at is not None:
        out.revoked_at.CopyFrom(to_timestamp(c.revoked_at))
    return out


def issued_to_pb(issued: IssuedCredential) -> credentials_pb2.CreateCredentialResponse:
    return credentials_pb2.CreateCredentialResponse(
        success=True, credential=credential_to_pb(issued.credential), token=issued.token
    )


def credentials_to_pb(items: Sequence[Credential]) -> credentials_pb2.ListCredentialsResponse:
    return credentials_pb2.ListCredentialsResponse(credentials=[credential_to_pb(c) for c in items])


def revoked_to_pb(c: Credential) -> credentials_pb2.RevokeCredentialResponse:
    return credentials_pb2.RevokeCredentialResponse(success=True, credential=credential_to_pb(c))


def caller_to_pb(c: Credential | None) -> credentials_pb2.GetCallerResponse:
    """None is a call accepted without authentication: it may do everything. (A tokenless
    call on a server that needs a token comes as ANONYMOUS: no permission, no tenant.)"""
    return credentials_pb2.GetCallerResponse(auth_required=c is not None, credential=credential_to_pb(c or OPEN_CALLER))
