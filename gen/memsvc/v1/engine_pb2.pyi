import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RetrieveRequest(_message.Message):
    __slots__ = ("api_key_id", "session_id", "query", "strategy", "max_tokens", "scope", "limit", "min_score", "as_of")
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    api_key_id: str
    session_id: str
    query: str
    strategy: str
    max_tokens: int
    scope: str
    limit: int
    min_score: float
    as_of: _timestamp_pb2.Timestamp
    def __init__(self, api_key_id: _Optional[str] = ..., session_id: _Optional[str] = ..., query: _Optional[str] = ..., strategy: _Optional[str] = ..., max_tokens: _Optional[int] = ..., scope: _Optional[str] = ..., limit: _Optional[int] = ..., min_score: _Optional[float] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RetrievedMemory(_message.Message):
    __slots__ = ("id", "type", "key", "content", "score", "tokens", "tier", "vec_score", "fts_score", "session_id", "occurred_at", "valid_from", "valid_to")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    VEC_SCORE_FIELD_NUMBER: _ClassVar[int]
    FTS_SCORE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    key: str
    content: str
    score: float
    tokens: int
    tier: str
    vec_score: float
    fts_score: float
    session_id: str
    occurred_at: _timestamp_pb2.Timestamp
    valid_from: _timestamp_pb2.Timestamp
    valid_to: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., key: _Optional[str] = ..., content: _Optional[str] = ..., score: _Optional[float] = ..., tokens: _Optional[int] = ..., tier: _Optional[str] = ..., vec_score: _Optional[float] = ..., fts_score: _Optional[float] = ..., session_id: _Optional[str] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Resolution(_message.Message):
    __slots__ = ("embedding_source", "embedding_model", "vector_store", "strategy_used", "rerank_applied", "fallback_reason", "backend", "below_min_score", "keyword_floor", "vector_floor", "skipped_for_age")
    EMBEDDING_SOURCE_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_MODEL_FIELD_NUMBER: _ClassVar[int]
    VECTOR_STORE_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_USED_FIELD_NUMBER: _ClassVar[int]
    RERANK_APPLIED_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    BELOW_MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    KEYWORD_FLOOR_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FLOOR_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FOR_AGE_FIELD_NUMBER: _ClassVar[int]
    embedding_source: str
    embedding_model: str
    vector_store: str
    strategy_used: str
    rerank_applied: bool
    fallback_reason: str
    backend: str
    below_min_score: int
    keyword_floor: float
    vector_floor: float
    skipped_for_age: int
    def __init__(self, embedding_source: _Optional[str] = ..., embedding_model: _Optional[str] = ..., vector_store: _Optional[str] = ..., strategy_used: _Optional[str] = ..., rerank_applied: _Optional[bool] = ..., fallback_reason: _Optional[str] = ..., backend: _Optional[str] = ..., below_min_score: _Optional[int] = ..., keyword_floor: _Optional[float] = ..., vector_floor: _Optional[float] = ..., skipped_for_age: _Optional[int] = ...) -> None: ...

class RetrieveResponse(_message.Message):
    __slots__ = ("memories", "total_tokens", "resolution")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[RetrievedMemory]
    total_tokens: int
    resolution: Resolution
    def __init__(self, memories: _Optional[_Iterable[_Union[RetrievedMemory, _Mapping]]] = ..., total_tokens: _Optional[int] = ..., resolution: _Optional[_Union[Resolution, _Mapping]] = ...) -> None: ...

class InjectOptions(_message.Message):
    __slots__ = ("cache_safe", "system_message_must_be_first")
    CACHE_SAFE_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_MESSAGE_MUST_BE_FIRST_FIELD_NUMBER: _ClassVar[int]
    cache_safe: bool
    system_message_must_be_first: bool
    def __init__(self, cache_safe: _Optional[bool] = ..., system_message_must_be_first: _Optional[bool] = ...) -> None: ...

class InjectRequest(_message.Message):
    __slots__ = ("request", "provider", "model", "api_key_id", "session_id", "no_memory", "options", "limit", "min_score", "as_of")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NO_MEMORY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    request: _struct_pb2.Struct
    provider: str
    model: str
    api_key_id: str
    session_id: str
    no_memory: bool
    options: InjectOptions
    limit: int
    min_score: float
    as_of: _timestamp_pb2.Timestamp
    def __init__(self, request: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ..., api_key_id: _Optional[str] = ..., session_id: _Optional[str] = ..., no_memory: _Optional[bool] = ..., options: _Optional[_Union[InjectOptions, _Mapping]] = ..., limit: _Optional[int] = ..., min_score: _Optional[float] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class InjectResponse(_message.Message):
    __slots__ = ("request", "injected", "memory_ids", "tokens", "role", "skipped_reason", "format", "below_min_score", "skipped_for_age")
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    INJECTED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_REASON_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    BELOW_MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FOR_AGE_FIELD_NUMBER: _ClassVar[int]
    request: _struct_pb2.Struct
    injected: bool
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    tokens: int
    role: str
    skipped_reason: str
    format: str
    below_min_score: int
    skipped_for_age: int
    def __init__(self, request: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., injected: _Optional[bool] = ..., memory_ids: _Optional[_Iterable[str]] = ..., tokens: _Optional[int] = ..., role: _Optional[str] = ..., skipped_reason: _Optional[str] = ..., format: _Optional[str] = ..., below_min_score: _Optional[int] = ..., skipped_for_age: _Optional[int] = ...) -> None: ...

class ExtractRequest(_message.Message):
    __slots__ = ("text", "user_message", "assistant_message", "api_key_id", "session_id", "dry_run", "wait", "no_memory")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    USER_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ASSISTANT_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    NO_MEMORY_FIELD_NUMBER: _ClassVar[int]
    text: str
    user_message: str
    assistant_message: str
    api_key_id: str
    session_id: str
    dry_run: bool
    wait: bool
    no_memory: bool
    def __init__(self, text: _Optional[str] = ..., user_message: _Optional[str] = ..., assistant_message: _Optional[str] = ..., api_key_id: _Optional[str] = ..., session_id: _Optional[str] = ..., dry_run: _Optional[bool] = ..., wait: _Optional[bool] = ..., no_memory: _Optional[bool] = ...) -> None: ...

class ExtractedFact(_message.Message):
    __slots__ = ("category", "type", "key", "content")
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    category: str
    type: str
    key: str
    content: str
    def __init__(self, category: _Optional[str] = ..., type: _Optional[str] = ..., key: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class ExtractResponse(_message.Message):
    __slots__ = ("facts", "stored", "accepted", "skipped_reason")
    FACTS_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_REASON_FIELD_NUMBER: _ClassVar[int]
    facts: _containers.RepeatedCompositeFieldContainer[ExtractedFact]
    stored: int
    accepted: bool
    skipped_reason: str
    def __init__(self, facts: _Optional[_Iterable[_Union[ExtractedFact, _Mapping]]] = ..., stored: _Optional[int] = ..., accepted: _Optional[bool] = ..., skipped_reason: _Optional[str] = ...) -> None: ...

class RetrievePreviewRequest(_message.Message):
    __slots__ = ("query", "strategy", "max_tokens", "api_key_id", "session_id", "limit", "as_of")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    query: str
    strategy: str
    max_tokens: int
    api_key_id: str
    session_id: str
    limit: int
    as_of: _timestamp_pb2.Timestamp
    def __init__(self, query: _Optional[str] = ..., strategy: _Optional[str] = ..., max_tokens: _Optional[int] = ..., api_key_id: _Optional[str] = ..., session_id: _Optional[str] = ..., limit: _Optional[int] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RetrievePreviewResponse(_message.Message):
    __slots__ = ("memories", "resolution", "total_tokens_used", "budget_max_tokens")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_USED_FIELD_NUMBER: _ClassVar[int]
    BUDGET_MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[RetrievedMemory]
    resolution: Resolution
    total_tokens_used: int
    budget_max_tokens: int
    def __init__(self, memories: _Optional[_Iterable[_Union[RetrievedMemory, _Mapping]]] = ..., resolution: _Optional[_Union[Resolution, _Mapping]] = ..., total_tokens_used: _Optional[int] = ..., budget_max_tokens: _Optional[int] = ...) -> None: ...

class ListEmbeddingProvidersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EmbeddingModel(_message.Message):
    __slots__ = ("id", "name", "dimensions")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    dimensions: int
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., dimensions: _Optional[int] = ...) -> None: ...

class EmbeddingProvider(_message.Message):
    __slots__ = ("provider", "has_key", "models", "kind")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    HAS_KEY_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    provider: str
    has_key: bool
    models: _containers.RepeatedCompositeFieldContainer[EmbeddingModel]
    kind: str
    def __init__(self, provider: _Optional[str] = ..., has_key: _Optional[bool] = ..., models: _Optional[_Iterable[_Union[EmbeddingModel, _Mapping]]] = ..., kind: _Optional[str] = ...) -> None: ...

class ListEmbeddingProvidersResponse(_message.Message):
    __slots__ = ("providers",)
    PROVIDERS_FIELD_NUMBER: _ClassVar[int]
    providers: _containers.RepeatedCompositeFieldContainer[EmbeddingProvider]
    def __init__(self, providers: _Optional[_Iterable[_Union[EmbeddingProvider, _Mapping]]] = ...) -> None: ...

class GetEngineStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class KeywordStatus(_message.Message):
    __slots__ = ("available", "backend", "reason")
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    available: bool
    backend: str
    reason: str
    def __init__(self, available: _Optional[bool] = ..., backend: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class EmbeddingCacheStats(_message.Message):
    __slots__ = ("hits", "misses", "size")
    HITS_FIELD_NUMBER: _ClassVar[int]
    MISSES_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    hits: int
    misses: int
    size: int
    def __init__(self, hits: _Optional[int] = ..., misses: _Optional[int] = ..., size: _Optional[int] = ...) -> None: ...

class EmbeddingStatus(_message.Message):
    __slots__ = ("source", "model", "dimensions", "available", "reason", "cache_stats", "loaded", "signature", "state", "phase", "progress")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CACHE_STATS_FIELD_NUMBER: _ClassVar[int]
    LOADED_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    source: str
    model: str
    dimensions: int
    available: bool
    reason: str
    cache_stats: EmbeddingCacheStats
    loaded: bool
    signature: str
    state: str
    phase: str
    progress: float
    def __init__(self, source: _Optional[str] = ..., model: _Optional[str] = ..., dimensions: _Optional[int] = ..., available: _Optional[bool] = ..., reason: _Optional[str] = ..., cache_stats: _Optional[_Union[EmbeddingCacheStats, _Mapping]] = ..., loaded: _Optional[bool] = ..., signature: _Optional[str] = ..., state: _Optional[str] = ..., phase: _Optional[str] = ..., progress: _Optional[float] = ...) -> None: ...

class VectorStoreStatus(_message.Message):
    __slots__ = ("backend", "available", "row_count", "needs_reindex", "reason", "signature")
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    ROW_COUNT_FIELD_NUMBER: _ClassVar[int]
    NEEDS_REINDEX_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    backend: str
    available: bool
    row_count: int
    needs_reindex: int
    reason: str
    signature: str
    def __init__(self, backend: _Optional[str] = ..., available: _Optional[bool] = ..., row_count: _Optional[int] = ..., needs_reindex: _Optional[int] = ..., reason: _Optional[str] = ..., signature: _Optional[str] = ...) -> None: ...

class QdrantStatus(_message.Message):
    __slots__ = ("enabled", "healthy", "latency_ms", "error")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    healthy: bool
    latency_ms: int
    error: str
    def __init__(self, enabled: _Optional[bool] = ..., healthy: _Optional[bool] = ..., latency_ms: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class RerankStatus(_message.Message):
    __slots__ = ("enabled", "provider", "model", "available", "reason")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    provider: str
    model: str
    available: bool
    reason: str
    def __init__(self, enabled: _Optional[bool] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ..., available: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class RetrievalStatus(_message.Message):
    __slots__ = ("fusion", "rrf_k", "list_top_k")
    FUSION_FIELD_NUMBER: _ClassVar[int]
    RRF_K_FIELD_NUMBER: _ClassVar[int]
    LIST_TOP_K_FIELD_NUMBER: _ClassVar[int]
    fusion: str
    rrf_k: int
    list_top_k: int
    def __init__(self, fusion: _Optional[str] = ..., rrf_k: _Optional[int] = ..., list_top_k: _Optional[int] = ...) -> None: ...

class EngineStatus(_message.Message):
    __slots__ = ("keyword", "embedding", "vector_store", "qdrant", "rerank", "retrieval", "backends", "reindex", "working_sets")
    KEYWORD_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_FIELD_NUMBER: _ClassVar[int]
    VECTOR_STORE_FIELD_NUMBER: _ClassVar[int]
    QDRANT_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_FIELD_NUMBER: _ClassVar[int]
    BACKENDS_FIELD_NUMBER: _ClassVar[int]
    REINDEX_FIELD_NUMBER: _ClassVar[int]
    WORKING_SETS_FIELD_NUMBER: _ClassVar[int]
    keyword: KeywordStatus
    embedding: EmbeddingStatus
    vector_store: VectorStoreStatus
    qdrant: QdrantStatus
    rerank: RerankStatus
    retrieval: RetrievalStatus
    backends: _containers.RepeatedCompositeFieldContainer[BackendStatus]
    reindex: ReindexStatus
    working_sets: WorkingSetStatus
    def __init__(self, keyword: _Optional[_Union[KeywordStatus, _Mapping]] = ..., embedding: _Optional[_Union[EmbeddingStatus, _Mapping]] = ..., vector_store: _Optional[_Union[VectorStoreStatus, _Mapping]] = ..., qdrant: _Optional[_Union[QdrantStatus, _Mapping]] = ..., rerank: _Optional[_Union[RerankStatus, _Mapping]] = ..., retrieval: _Optional[_Union[RetrievalStatus, _Mapping]] = ..., backends: _Optional[_Iterable[_Union[BackendStatus, _Mapping]]] = ..., reindex: _Optional[_Union[ReindexStatus, _Mapping]] = ..., working_sets: _Optional[_Union[WorkingSetStatus, _Mapping]] = ...) -> None: ...

class WorkingSetStatus(_message.Message):
    __slots__ = ("owners", "bytes", "budget_bytes", "builds", "updates", "store_searches", "evictions", "past_builds", "past_hits")
    OWNERS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    BUDGET_BYTES_FIELD_NUMBER: _ClassVar[int]
    BUILDS_FIELD_NUMBER: _ClassVar[int]
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    STORE_SEARCHES_FIELD_NUMBER: _ClassVar[int]
    EVICTIONS_FIELD_NUMBER: _ClassVar[int]
    PAST_BUILDS_FIELD_NUMBER: _ClassVar[int]
    PAST_HITS_FIELD_NUMBER: _ClassVar[int]
    owners: int
    bytes: int
    budget_bytes: int
    builds: int
    updates: int
    store_searches: int
    evictions: int
    past_builds: int
    past_hits: int
    def __init__(self, owners: _Optional[int] = ..., bytes: _Optional[int] = ..., budget_bytes: _Optional[int] = ..., builds: _Optional[int] = ..., updates: _Optional[int] = ..., store_searches: _Optional[int] = ..., evictions: _Optional[int] = ..., past_builds: _Optional[int] = ..., past_hits: _Optional[int] = ...) -> None: ...

class ReindexStatus(_message.Message):
    __slots__ = ("running", "target", "progress", "holder")
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    running: bool
    target: str
    progress: ReindexProgress
    holder: str
    def __init__(self, running: _Optional[bool] = ..., target: _Optional[str] = ..., progress: _Optional[_Union[ReindexProgress, _Mapping]] = ..., holder: _Optional[str] = ...) -> None: ...

class BackendStatus(_message.Message):
    __slots__ = ("name", "type", "role", "healthy", "latency_ms", "error", "pending_syncs", "checked_at")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    HEALTHY_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PENDING_SYNCS_FIELD_NUMBER: _ClassVar[int]
    CHECKED_AT_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    role: str
    healthy: bool
    latency_ms: float
    error: str
    pending_syncs: int
    checked_at: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ..., role: _Optional[str] = ..., healthy: _Optional[bool] = ..., latency_ms: _Optional[float] = ..., error: _Optional[str] = ..., pending_syncs: _Optional[int] = ..., checked_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SummarizeRequest(_message.Message):
    __slots__ = ("older_than_days", "api_key_id", "dry_run", "all_tenants", "budget_tokens", "session_id")
    OLDER_THAN_DAYS_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    ALL_TENANTS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    older_than_days: int
    api_key_id: str
    dry_run: bool
    all_tenants: bool
    budget_tokens: int
    session_id: str
    def __init__(self, older_than_days: _Optional[int] = ..., api_key_id: _Optional[str] = ..., dry_run: _Optional[bool] = ..., all_tenants: _Optional[bool] = ..., budget_tokens: _Optional[int] = ..., session_id: _Optional[str] = ...) -> None: ...

class SummaryCandidate(_message.Message):
    __slots__ = ("id", "type", "key", "tokens", "api_key_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    key: str
    tokens: int
    api_key_id: str
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., key: _Optional[str] = ..., tokens: _Optional[int] = ..., api_key_id: _Optional[str] = ...) -> None: ...

class SummarizeResponse(_message.Message):
    __slots__ = ("candidates", "total_tokens", "tokens_saved", "deleted_count", "summary_id", "dry_run", "summary_ids", "original_count", "summarized_count")
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_SAVED_FIELD_NUMBER: _ClassVar[int]
    DELETED_COUNT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_IDS_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    SUMMARIZED_COUNT_FIELD_NUMBER: _ClassVar[int]
    candidates: _containers.RepeatedCompositeFieldContainer[SummaryCandidate]
    total_tokens: int
    tokens_saved: int
    deleted_count: int
    summary_id: str
    dry_run: bool
    summary_ids: _containers.RepeatedScalarFieldContainer[str]
    original_count: int
    summarized_count: int
    def __init__(self, candidates: _Optional[_Iterable[_Union[SummaryCandidate, _Mapping]]] = ..., total_tokens: _Optional[int] = ..., tokens_saved: _Optional[int] = ..., deleted_count: _Optional[int] = ..., summary_id: _Optional[str] = ..., dry_run: _Optional[bool] = ..., summary_ids: _Optional[_Iterable[str]] = ..., original_count: _Optional[int] = ..., summarized_count: _Optional[int] = ...) -> None: ...

class ReindexRequest(_message.Message):
    __slots__ = ("force", "limit", "target", "attach")
    FORCE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    force: bool
    limit: int
    target: str
    attach: bool
    def __init__(self, force: _Optional[bool] = ..., limit: _Optional[int] = ..., target: _Optional[str] = ..., attach: _Optional[bool] = ...) -> None: ...

class ReindexProgress(_message.Message):
    __slots__ = ("started", "pending", "processed", "errors", "rate_per_second", "eta_seconds", "state", "error")
    STARTED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    PROCESSED_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    ETA_SECONDS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    started: bool
    pending: int
    processed: int
    errors: int
    rate_per_second: float
    eta_seconds: float
    state: str
    error: str
    def __init__(self, started: _Optional[bool] = ..., pending: _Optional[int] = ..., processed: _Optional[int] = ..., errors: _Optional[int] = ..., rate_per_second: _Optional[float] = ..., eta_seconds: _Optional[float] = ..., state: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...
