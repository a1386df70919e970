import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.rpc import status_pb2 as _status_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Memory(_message.Message):
    __slots__ = ("id", "api_key_id", "session_id", "type", "key", "content", "metadata", "created_at", "updated_at", "expires_at", "access_count", "last_accessed_at", "keep", "occurred_at", "valid_from", "valid_to")
    ID_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    ACCESS_COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_ACCESSED_AT_FIELD_NUMBER: _ClassVar[int]
    KEEP_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    id: str
    api_key_id: str
    session_id: str
    type: str
    key: str
    content: str
    metadata: _struct_pb2.Struct
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    access_count: int
    last_accessed_at: _timestamp_pb2.Timestamp
    keep: bool
    occurred_at: _timestamp_pb2.Timestamp
    valid_from: _timestamp_pb2.Timestamp
    valid_to: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., api_key_id: _Optional[str] = ..., session_id: _Optional[str] = ..., type: _Optional[str] = ..., key: _Optional[str] = ..., content: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., access_count: _Optional[int] = ..., last_accessed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., keep: _Optional[bool] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListMemoriesRequest(_message.Message):
    __slots__ = ("api_key_id", "type", "session_id", "q", "limit", "page", "offset")
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    Q_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    api_key_id: str
    type: str
    session_id: str
    q: str
    limit: int
    page: int
    offset: int
    def __init__(self, api_key_id: _Optional[str] = ..., type: _Optional[str] = ..., session_id: _Optional[str] = ..., q: _Optional[str] = ..., limit: _Optional[int] = ..., page: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class CacheStats(_message.Message):
    __slots__ = ("hits", "misses", "size")
    HITS_FIELD_NUMBER: _ClassVar[int]
    MISSES_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    hits: int
    misses: int
    size: int
    def __init__(self, hits: _Optional[int] = ..., misses: _Optional[int] = ..., size: _Optional[int] = ...) -> None: ...

class MemoryStats(_message.Message):
    __slots__ = ("total", "by_type", "tokens_used", "hit_rate", "cache_stats")
    class ByTypeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    BY_TYPE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_USED_FIELD_NUMBER: _ClassVar[int]
    HIT_RATE_FIELD_NUMBER: _ClassVar[int]
    CACHE_STATS_FIELD_NUMBER: _ClassVar[int]
    total: int
    by_type: _containers.ScalarMap[str, int]
    tokens_used: int
    hit_rate: float
    cache_stats: CacheStats
    def __init__(self, total: _Optional[int] = ..., by_type: _Optional[_Mapping[str, int]] = ..., tokens_used: _Optional[int] = ..., hit_rate: _Optional[float] = ..., cache_stats: _Optional[_Union[CacheStats, _Mapping]] = ...) -> None: ...

class ListMemoriesResponse(_message.Message):
    __slots__ = ("data", "total", "page", "limit", "total_pages", "stats")
    DATA_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    PAGE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    TOTAL_PAGES_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    data: _containers.RepeatedCompositeFieldContainer[Memory]
    total: int
    page: int
    limit: int
    total_pages: int
    stats: MemoryStats
    def __init__(self, data: _Optional[_Iterable[_Union[Memory, _Mapping]]] = ..., total: _Optional[int] = ..., page: _Optional[int] = ..., limit: _Optional[int] = ..., total_pages: _Optional[int] = ..., stats: _Optional[_Union[MemoryStats, _Mapping]] = ...) -> None: ...

class CreateMemoryRequest(_message.Message):
    __slots__ = ("api_key_id", "session_id", "type", "key", "content", "metadata", "expires_at", "keep", "occurred_at")
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    KEEP_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    api_key_id: str
    session_id: str
    type: str
    key: str
    content: str
    metadata: _struct_pb2.Struct
    expires_at: _timestamp_pb2.Timestamp
    keep: bool
    occurred_at: _timestamp_pb2.Timestamp
    def __init__(self, api_key_id: _Optional[str] = ..., session_id: _Optional[str] = ..., type: _Optional[str] = ..., key: _Optional[str] = ..., content: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., keep: _Optional[bool] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateMemoryResponse(_message.Message):
    __slots__ = ("success", "id", "created", "merged_into")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MERGED_INTO_FIELD_NUMBER: _ClassVar[int]
    success: bool
    id: str
    created: bool
    merged_into: str
    def __init__(self, success: _Optional[bool] = ..., id: _Optional[str] = ..., created: _Optional[bool] = ..., merged_into: _Optional[str] = ...) -> None: ...

class CreateMemoriesRequest(_message.Message):
    __slots__ = ("memories",)
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[CreateMemoryRequest]
    def __init__(self, memories: _Optional[_Iterable[_Union[CreateMemoryRequest, _Mapping]]] = ...) -> None: ...

class CreateMemoryResult(_message.Message):
    __slots__ = ("success", "id", "created", "error", "merged_into")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MERGED_INTO_FIELD_NUMBER: _ClassVar[int]
    success: bool
    id: str
    created: bool
    error: _status_pb2.Status
    merged_into: str
    def __init__(self, success: _Optional[bool] = ..., id: _Optional[str] = ..., created: _Optional[bool] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ..., merged_into: _Optional[str] = ...) -> None: ...

class CreateMemoriesResponse(_message.Message):
    __slots__ = ("results", "stored_count", "failed_count")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    STORED_COUNT_FIELD_NUMBER: _ClassVar[int]
    FAILED_COUNT_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CreateMemoryResult]
    stored_count: int
    failed_count: int
    def __init__(self, results: _Optional[_Iterable[_Union[CreateMemoryResult, _Mapping]]] = ..., stored_count: _Optional[int] = ..., failed_count: _Optional[int] = ...) -> None: ...

class ClearMemoriesRequest(_message.Message):
    __slots__ = ("api_key_id", "type", "session_id", "older_than")
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    OLDER_THAN_FIELD_NUMBER: _ClassVar[int]
    api_key_id: str
    type: str
    session_id: str
    older_than: _timestamp_pb2.Timestamp
    def __init__(self, api_key_id: _Optional[str] = ..., type: _Optional[str] = ..., session_id: _Optional[str] = ..., older_than: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ClearMemoriesResponse(_message.Message):
    __slots__ = ("success", "deleted_count")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    DELETED_COUNT_FIELD_NUMBER: _ClassVar[int]
    success: bool
    deleted_count: int
    def __init__(self, success: _Optional[bool] = ..., deleted_count: _Optional[int] = ...) -> None: ...

class GetMemoryRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class UpdateMemoryRequest(_message.Message):
    __slots__ = ("id", "type", "key", "content", "metadata", "api_key_id", "session_id", "expires_at", "created_at", "updated_at", "access_count", "last_accessed_at", "keep", "occurred_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    ACCESS_COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_ACCESSED_AT_FIELD_NUMBER: _ClassVar[int]
    KEEP_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    key: str
    content: str
    metadata: _struct_pb2.Struct
    api_key_id: str
    session_id: str
    expires_at: _timestamp_pb2.Timestamp
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    access_count: int
    last_accessed_at: _timestamp_pb2.Timestamp
    keep: bool
    occurred_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., key: _Optional[str] = ..., content: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., api_key_id: _Optional[str] = ..., session_id: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., access_count: _Optional[int] = ..., last_accessed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., keep: _Optional[bool] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class UpdateMemoryResponse(_message.Message):
    __slots__ = ("success", "memory")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    success: bool
    memory: Memory
    def __init__(self, success: _Optional[bool] = ..., memory: _Optional[_Union[Memory, _Mapping]] = ...) -> None: ...

class DeleteMemoryRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteMemoryResponse(_message.Message):
    __slots__ = ("success",)
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    success: bool
    def __init__(self, success: _Optional[bool] = ...) -> None: ...

class GetMemoryHistoryRequest(_message.Message):
    __slots__ = ("id", "limit", "page_token")
    ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    id: str
    limit: int
    page_token: str
    def __init__(self, id: _Optional[str] = ..., limit: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class MemoryHistoryEntry(_message.Message):
    __slots__ = ("event", "at", "author", "changes", "related_id")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    RELATED_ID_FIELD_NUMBER: _ClassVar[int]
    event: str
    at: _timestamp_pb2.Timestamp
    author: str
    changes: _struct_pb2.Struct
    related_id: str
    def __init__(self, event: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., author: _Optional[str] = ..., changes: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., related_id: _Optional[str] = ...) -> None: ...

class GetMemoryHistoryResponse(_message.Message):
    __slots__ = ("id", "api_key_id", "entries", "versions", "next_page_token")
    ID_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    id: str
    api_key_id: str
    entries: _containers.RepeatedCompositeFieldContainer[MemoryHistoryEntry]
    versions: _containers.RepeatedCompositeFieldContainer[Memory]
    next_page_token: str
    def __init__(self, id: _Optional[str] = ..., api_key_id: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[MemoryHistoryEntry, _Mapping]]] = ..., versions: _Optional[_Iterable[_Union[Memory, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchMemoriesRequest(_message.Message):
    __slots__ = ("api_key_id", "resume_token", "stop_when_caught_up")
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STOP_WHEN_CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    api_key_id: str
    resume_token: str
    stop_when_caught_up: bool
    def __init__(self, api_key_id: _Optional[str] = ..., resume_token: _Optional[str] = ..., stop_when_caught_up: _Optional[bool] = ...) -> None: ...

class MemoryEvent(_message.Message):
    __slots__ = ("kind", "resume_token", "memory_id", "api_key_id", "at", "author", "change", "changed_fields", "memory", "related_id")
    KIND_FIELD_NUMBER: _ClassVar[int]
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    RELATED_ID_FIELD_NUMBER: _ClassVar[int]
    kind: str
    resume_token: str
    memory_id: str
    api_key_id: str
    at: _timestamp_pb2.Timestamp
    author: str
    change: str
    changed_fields: _containers.RepeatedScalarFieldContainer[str]
    memory: Memory
    related_id: str
    def __init__(self, kind: _Optional[str] = ..., resume_token: _Optional[str] = ..., memory_id: _Optional[str] = ..., api_key_id: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., author: _Optional[str] = ..., change: _Optional[str] = ..., changed_fields: _Optional[_Iterable[str]] = ..., memory: _Optional[_Union[Memory, _Mapping]] = ..., related_id: _Optional[str] = ...) -> None: ...

class CheckHealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CheckHealthResponse(_message.Message):
    __slots__ = ("working", "latency_ms", "error")
    WORKING_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    working: bool
    latency_ms: int
    error: str
    def __init__(self, working: _Optional[bool] = ..., latency_ms: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class ListRecentFilesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListRecentFilesResponse(_message.Message):
    __slots__ = ("files",)
    FILES_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, files: _Optional[_Iterable[str]] = ...) -> None: ...

class GetRecentFileRequest(_message.Message):
    __slots__ = ("filename",)
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    filename: str
    def __init__(self, filename: _Optional[str] = ...) -> None: ...

class GetRecentFileResponse(_message.Message):
    __slots__ = ("content", "fingerprint", "identity_token")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_TOKEN_FIELD_NUMBER: _ClassVar[int]
    content: str
    fingerprint: str
    identity_token: str
    def __init__(self, content: _Optional[str] = ..., fingerprint: _Optional[str] = ..., identity_token: _Optional[str] = ...) -> None: ...

class ChatItem(_message.Message):
    __slots__ = ("role", "text", "source_index", "theater")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_INDEX_FIELD_NUMBER: _ClassVar[int]
    THEATER_FIELD_NUMBER: _ClassVar[int]
    role: str
    text: str
    source_index: int
    theater: bool
    def __init__(self, role: _Optional[str] = ..., text: _Optional[str] = ..., source_index: _Optional[int] = ..., theater: _Optional[bool] = ...) -> None: ...

class SaveRecentFileRequest(_message.Message):
    __slots__ = ("filename", "fingerprint", "identity_token", "chat")
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CHAT_FIELD_NUMBER: _ClassVar[int]
    filename: str
    fingerprint: str
    identity_token: str
    chat: _containers.RepeatedCompositeFieldContainer[ChatItem]
    def __init__(self, filename: _Optional[str] = ..., fingerprint: _Optional[str] = ..., identity_token: _Optional[str] = ..., chat: _Optional[_Iterable[_Union[ChatItem, _Mapping]]] = ...) -> None: ...

class SaveRecentFileResponse(_message.Message):
    __slots__ = ("success", "need_refresh", "catgirl_name", "fingerprint", "identity_token")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    NEED_REFRESH_FIELD_NUMBER: _ClassVar[int]
    CATGIRL_NAME_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_TOKEN_FIELD_NUMBER: _ClassVar[int]
    success: bool
    need_refresh: bool
    catgirl_name: str
    fingerprint: str
    identity_token: str
    def __init__(self, success: _Optional[bool] = ..., need_refresh: _Optional[bool] = ..., catgirl_name: _Optional[str] = ..., fingerprint: _Optional[str] = ..., identity_token: _Optional[str] = ...) -> None: ...

class AppendRecentMessagesRequest(_message.Message):
    __slots__ = ("character", "messages")
    CHARACTER_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    character: str
    messages: _containers.RepeatedCompositeFieldContainer[ChatItem]
    def __init__(self, character: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[ChatItem, _Mapping]]] = ...) -> None: ...

class AppendRecentMessagesResponse(_message.Message):
    __slots__ = ("success", "accepted", "pending")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    success: bool
    accepted: int
    pending: int
    def __init__(self, success: _Optional[bool] = ..., accepted: _Optional[int] = ..., pending: _Optional[int] = ...) -> None: ...

class RenameCharacterRequest(_message.Message):
    __slots__ = ("old_name", "new_name", "compat_alias")
    OLD_NAME_FIELD_NUMBER: _ClassVar[int]
    NEW_NAME_FIELD_NUMBER: _ClassVar[int]
    COMPAT_ALIAS_FIELD_NUMBER: _ClassVar[int]
    old_name: str
    new_name: str
    compat_alias: bool
    def __init__(self, old_name: _Optional[str] = ..., new_name: _Optional[str] = ..., compat_alias: _Optional[bool] = ...) -> None: ...

class RenameCharacterResponse(_message.Message):
    __slots__ = ("success", "changed", "already_renamed", "exists_after", "memory_renamed", "memory_server_reloaded")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    ALREADY_RENAMED_FIELD_NUMBER: _ClassVar[int]
    EXISTS_AFTER_FIELD_NUMBER: _ClassVar[int]
    MEMORY_RENAMED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_SERVER_RELOADED_FIELD_NUMBER: _ClassVar[int]
    success: bool
    changed: bool
    already_renamed: bool
    exists_after: bool
    memory_renamed: bool
    memory_server_reloaded: bool
    def __init__(self, success: _Optional[bool] = ..., changed: _Optional[bool] = ..., already_renamed: _Optional[bool] = ..., exists_after: _Optional[bool] = ..., memory_renamed: _Optional[bool] = ..., memory_server_reloaded: _Optional[bool] = ...) -> None: ...

class ScanLegacyRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LegacyEntry(_message.Message):
    __slots__ = ("name", "path", "is_dir", "size_bytes", "is_unlinked", "runtime_has_same_name")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    IS_DIR_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    IS_UNLINKED_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_HAS_SAME_NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    path: str
    is_dir: bool
    size_bytes: float
    is_unlinked: bool
    runtime_has_same_name: bool
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ..., is_dir: _Optional[bool] = ..., size_bytes: _Optional[float] = ..., is_unlinked: _Optional[bool] = ..., runtime_has_same_name: _Optional[bool] = ...) -> None: ...

class LegacyRoot(_message.Message):
    __slots__ = ("root", "source", "exists", "entries")
    ROOT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    EXISTS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    root: str
    source: str
    exists: bool
    entries: _containers.RepeatedCompositeFieldContainer[LegacyEntry]
    def __init__(self, root: _Optional[str] = ..., source: _Optional[str] = ..., exists: _Optional[bool] = ..., entries: _Optional[_Iterable[_Union[LegacyEntry, _Mapping]]] = ...) -> None: ...

class ScanLegacyResponse(_message.Message):
    __slots__ = ("legacy_roots", "runtime_memory_dir", "total_entries", "total_size_bytes", "success")
    LEGACY_ROOTS_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_MEMORY_DIR_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    legacy_roots: _containers.RepeatedCompositeFieldContainer[LegacyRoot]
    runtime_memory_dir: str
    total_entries: int
    total_size_bytes: float
    success: bool
    def __init__(self, legacy_roots: _Optional[_Iterable[_Union[LegacyRoot, _Mapping]]] = ..., runtime_memory_dir: _Optional[str] = ..., total_entries: _Optional[int] = ..., total_size_bytes: _Optional[float] = ..., success: _Optional[bool] = ...) -> None: ...

class PurgeLegacyRequest(_message.Message):
    __slots__ = ("paths",)
    PATHS_FIELD_NUMBER: _ClassVar[int]
    paths: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Value]
    def __init__(self, paths: _Optional[_Iterable[_Union[_struct_pb2.Value, _Mapping]]] = ...) -> None: ...

class PurgeError(_message.Message):
    __slots__ = ("path", "error")
    PATH_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    path: str
    error: str
    def __init__(self, path: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class PurgeLegacyResponse(_message.Message):
    __slots__ = ("success", "removed", "errors")
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    success: bool
    removed: _containers.RepeatedScalarFieldContainer[str]
    errors: _containers.RepeatedCompositeFieldContainer[PurgeError]
    def __init__(self, success: _Optional[bool] = ..., removed: _Optional[_Iterable[str]] = ..., errors: _Optional[_Iterable[_Union[PurgeError, _Mapping]]] = ...) -> None: ...
