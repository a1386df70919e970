from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetMemorySettingsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MemorySettings(_message.Message):
    __slots__ = ("enabled", "max_tokens", "retention_days", "strategy", "scope", "skills_enabled", "embedding_source", "embedding_provider_model", "custom_base_url", "custom_model_id", "transformers_enabled", "static_enabled", "rerank_enabled", "rerank_provider_model", "vector_store", "primary_backend", "fallback_backends", "backend_configs", "dedup_on_write")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RETENTION_DAYS_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SKILLS_ENABLED_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_SOURCE_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_PROVIDER_MODEL_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_BASE_URL_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSFORMERS_ENABLED_FIELD_NUMBER: _ClassVar[int]
    STATIC_ENABLED_FIELD_NUMBER: _ClassVar[int]
    RERANK_ENABLED_FIELD_NUMBER: _ClassVar[int]
    RERANK_PROVIDER_MODEL_FIELD_NUMBER: _ClassVar[int]
    VECTOR_STORE_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_BACKEND_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_BACKENDS_FIELD_NUMBER: _ClassVar[int]
    BACKEND_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    DEDUP_ON_WRITE_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    max_tokens: int
    retention_days: int
    strategy: str
    scope: str
    skills_enabled: bool
    embedding_source: str
    embedding_provider_model: str
    custom_base_url: str
    custom_model_id: str
    transformers_enabled: bool
    static_enabled: bool
    rerank_enabled: bool
    rerank_provider_model: str
    vector_store: str
    primary_backend: str
    fallback_backends: _containers.RepeatedScalarFieldContainer[str]
    backend_configs: _struct_pb2.Struct
    dedup_on_write: bool
    def __init__(self, enabled: _Optional[bool] = ..., max_tokens: _Optional[int] = ..., retention_days: _Optional[int] = ..., strategy: _Optional[str] = ..., scope: _Optional[str] = ..., skills_enabled: _Optional[bool] = ..., embedding_source: _Optional[str] = ..., embedding_provider_model: _Optional[str] = ..., custom_base_url: _Optional[str] = ..., custom_model_id: _Optional[str] = ..., transformers_enabled: _Optional[bool] = ..., static_enabled: _Optional[bool] = ..., rerank_enabled: _Optional[bool] = ..., rerank_provider_model: _Optional[str] = ..., vector_store: _Optional[str] = ..., primary_backend: _Optional[str] = ..., fallback_backends: _Optional[_Iterable[str]] = ..., backend_configs: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., dedup_on_write: _Optional[bool] = ...) -> None: ...

class UpdateMemorySettingsRequest(_message.Message):
    __slots__ = ("settings",)
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: _struct_pb2.Struct
    def __init__(self, settings: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GetQdrantSettingsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QdrantSettings(_message.Message):
    __slots__ = ("enabled", "host", "port", "collection", "embedding_model", "has_api_key", "api_key_masked", "quantization", "local_path")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_MODEL_FIELD_NUMBER: _ClassVar[int]
    HAS_API_KEY_FIELD_NUMBER: _ClassVar[int]
    API_KEY_MASKED_FIELD_NUMBER: _ClassVar[int]
    QUANTIZATION_FIELD_NUMBER: _ClassVar[int]
    LOCAL_PATH_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    host: str
    port: int
    collection: str
    embedding_model: str
    has_api_key: bool
    api_key_masked: str
    quantization: str
    local_path: str
    def __init__(self, enabled: _Optional[bool] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., collection: _Optional[str] = ..., embedding_model: _Optional[str] = ..., has_api_key: _Optional[bool] = ..., api_key_masked: _Optional[str] = ..., quantization: _Optional[str] = ..., local_path: _Optional[str] = ...) -> None: ...

class UpdateQdrantSettingsRequest(_message.Message):
    __slots__ = ("settings",)
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: _struct_pb2.Struct
    def __init__(self, settings: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CheckQdrantHealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QdrantHealth(_message.Message):
    __slots__ = ("ok", "latency_ms", "error", "collection_exists", "points_count", "mode")
    OK_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_EXISTS_FIELD_NUMBER: _ClassVar[int]
    POINTS_COUNT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    latency_ms: float
    error: str
    collection_exists: bool
    points_count: int
    mode: str
    def __init__(self, ok: _Optional[bool] = ..., latency_ms: _Optional[float] = ..., error: _Optional[str] = ..., collection_exists: _Optional[bool] = ..., points_count: _Optional[int] = ..., mode: _Optional[str] = ...) -> None: ...

class SearchQdrantRequest(_message.Message):
    __slots__ = ("query", "api_key_id", "session_id", "top_k")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    query: str
    api_key_id: str
    session_id: str
    top_k: int
    def __init__(self, query: _Optional[str] = ..., api_key_id: _Optional[str] = ..., session_id: _Optional[str] = ..., top_k: _Optional[int] = ...) -> None: ...

class QdrantHit(_message.Message):
    __slots__ = ("id", "score", "api_key_id", "session_id", "key", "content")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    id: str
    score: float
    api_key_id: str
    session_id: str
    key: str
    content: str
    def __init__(self, id: _Optional[str] = ..., score: _Optional[float] = ..., api_key_id: _Optional[str] = ..., session_id: _Optional[str] = ..., key: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class SearchQdrantResponse(_message.Message):
    __slots__ = ("results", "latency_ms")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[QdrantHit]
    latency_ms: int
    def __init__(self, results: _Optional[_Iterable[_Union[QdrantHit, _Mapping]]] = ..., latency_ms: _Optional[int] = ...) -> None: ...

class CleanupQdrantRequest(_message.Message):
    __slots__ = ("retention_days",)
    RETENTION_DAYS_FIELD_NUMBER: _ClassVar[int]
    retention_days: int
    def __init__(self, retention_days: _Optional[int] = ...) -> None: ...

class CleanupQdrantResponse(_message.Message):
    __slots__ = ("success", "deleted_count")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    DELETED_COUNT_FIELD_NUMBER: _ClassVar[int]
    success: bool
    deleted_count: int
    def __init__(self, success: _Optional[bool] = ..., deleted_count: _Optional[int] = ...) -> None: ...

class ListQdrantEmbeddingModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QdrantEmbeddingModel(_message.Message):
    __slots__ = ("id", "name", "dimensions", "provider")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    dimensions: int
    provider: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., dimensions: _Optional[int] = ..., provider: _Optional[str] = ...) -> None: ...

class ListQdrantEmbeddingModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[QdrantEmbeddingModel]
    def __init__(self, models: _Optional[_Iterable[_Union[QdrantEmbeddingModel, _Mapping]]] = ...) -> None: ...

class GetToggleRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ToggleConfig(_message.Message):
    __slots__ = ("enabled",)
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    def __init__(self, enabled: _Optional[bool] = ...) -> None: ...

class SetToggleRequest(_message.Message):
    __slots__ = ("enabled",)
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    enabled: _struct_pb2.Value
    def __init__(self, enabled: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class SetToggleResponse(_message.Message):
    __slots__ = ("success", "enabled")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    success: bool
    enabled: bool
    def __init__(self, success: _Optional[bool] = ..., enabled: _Optional[bool] = ...) -> None: ...
