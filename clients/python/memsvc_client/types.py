"""The SDK's values: small frozen dataclasses instead of protobuf messages.

Protobuf messages are mutable, say "unset" with empty strings and zeros, and hold Struct and
Timestamp wrappers; application code wants `None`, `datetime` and `dict`. Each result keeps
the message it was read from as `.raw` (left out of `==` and `repr`), for the fields this
SDK does not surface.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from memsvc_client._proto.memsvc.v1 import engine_pb2, memory_pb2, settings_pb2
    from memsvc_client.errors import MemsvcError

__all__ = [
    "AddResult",
    "BatchItem",
    "BatchResult",
    "ExtractResult",
    "ExtractedFact",
    "HistoryEntry",
    "InjectResult",
    "Memory",
    "MemoryEvent",
    "MemoryHistory",
    "MemoryPage",
    "MemorySettings",
    "MemoryStats",
    "MemoryType",
    "NewMemory",
    "ReindexProgress",
    "ReindexTarget",
    "Resolution",
    "RetrieveResult",
    "RetrievedMemory",
    "Scope",
    "Strategy",
]

#: The memory types the server accepts (`factual` when none is given).
MemoryType = Literal["factual", "episodic", "procedural", "semantic"]
#: Retrieval strategies (`exact` is an alias of `recent`); default: the server's settings.
Strategy = Literal["exact", "recent", "semantic", "hybrid"]
#: Whose memories a retrieval reads: the apiKeyId's, one session's, or (admin, when the
#: operator enabled it) every tenant's.
Scope = Literal["apiKey", "session", "global"]
#: Where a reindex writes: the store's own vector index (sqlite-vec or pgvector; those
#: earlier names still mean it), or a backfill of Qdrant from the store.
ReindexTarget = Literal["local", "qdrant", "sqlite-vec", "pgvector"]


@dataclass(frozen=True, slots=True)
class Memory:
    """One remembered fact, as stored.

    `created_at` is when memsvc stored it; `occurred_at` when the thing it records happened,
    as the writer said (None when not known). `keep` exempts it from the retention age limit.
    `valid_from` is since when this version holds (when a keyed add replaced an earlier fact,
    the time it took over; otherwise `occurred_at`, else `created_at`); `valid_to` is set only
    on a version a later fact superseded (a superseded version in `MemoryHistory.versions`, a
    hit of `retrieve(..., as_of=...)`), None on the current one.
    """

    id: str
    api_key_id: str
    content: str
    type: str
    key: str | None
    session_id: str | None
    metadata: Mapping[str, Any] = field(hash=False)
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    occurred_at: datetime | None
    last_accessed_at: datetime | None
    access_count: int
    keep: bool
    valid_from: datetime | None
    valid_to: datetime | None
    raw: memory_pb2.Memory = field(repr=False, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class NewMemory:
    """One item of `memories.add_many`: the fields `memories.add` takes.

    `api_key_id` None means the client's default apiKeyId. `keep` None lets the server decide
    (durable keys such as `name:` or `diet:` are kept). Naive datetimes are taken as UTC.
    """

    content: str
    type: MemoryType | None = None
    key: str | None = None
    session_id: str | None = None
    metadata: Mapping[str, Any] | None = field(default=None, hash=False)
    expires_at: datetime | None = None
    occurred_at: datetime | None = None
    keep: bool | None = None
    api_key_id: str | None = None


@dataclass(frozen=True, slots=True)
class AddResult:
    """A stored memory's id; `created` is False when an existing (apiKeyId, key) memory was
    updated in place (an upsert), or when the memory was merged into an existing one.

    `merged_into` is set when nothing new was stored because a memory of the owner (of the
    same type) already says the same: that memory's id (also `id`), whose history records the
    merge as a `merged` entry. Only memories without a key that are not conversation turns
    (episodic with a session) are merged; the setting `dedup_on_write=False` turns it off.
    """

    id: str
    created: bool
    merged_into: str | None = None


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One item of `add_many`, in request order: stored (`id`, `created`, and `merged_into`
    as `AddResult`'s) or refused (`error`, the exception `add` would have raised for it alone;
    nothing of it was stored)."""

    id: str | None
    created: bool
    error: MemsvcError | None = field(compare=False, hash=False)
    merged_into: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class BatchResult:
    """The outcome of `add_many`: one `BatchItem` per item, in order. Valid items are stored
    even when others are refused; check `failed_count` (or each item's `ok`)."""

    items: tuple[BatchItem, ...]
    stored_count: int
    failed_count: int
    raw: memory_pb2.CreateMemoriesResponse = field(repr=False, compare=False, hash=False)

    @property
    def ids(self) -> list[str | None]:
        """Each item's stored id (None where refused), in request order."""
        return [item.id for item in self.items]


@dataclass(frozen=True, slots=True)
class MemoryStats:
    """Figures over every memory matching a listing's filters (not just the page)."""

    total: int
    by_type: Mapping[str, int] = field(hash=False)
    tokens_used: int
    hit_rate: float


@dataclass(frozen=True, slots=True)
class MemoryPage:
    """One page of `memories.page`: `memories` newest first, `total` matching memories."""

    memories: tuple[Memory, ...]
    total: int
    offset: int
    limit: int
    stats: MemoryStats
    raw: memory_pb2.ListMemoriesResponse = field(repr=False, compare=False, hash=False)

    @property
    def has_more(self) -> bool:
        return self.offset + len(self.memories) < self.total


@dataclass(frozen=True, slots=True)
class RetrievedMemory:
    """One ranked memory. `tier` says what found it (keyword, vector, hybrid-<fusion>,
    qdrant, recent, context); `vec_score` / `fts_score` are None when that list missed it.
    `valid_from` / `valid_to` as in `Memory`: in a retrieval with `as_of`, a fact a later one
    superseded comes back as it was then, with `valid_to` set."""

    id: str
    content: str
    type: str
    key: str | None
    session_id: str | None
    score: float
    tokens: int
    tier: str
    vec_score: float | None
    fts_score: float | None
    occurred_at: datetime | None
    valid_from: datetime | None = None
    valid_to: datetime | None = None


@dataclass(frozen=True, slots=True)
class Resolution:
    """How a retrieval was answered: which embedding source, vector store and strategy ran,
    why it fell back (English, empty when it ran as asked), the relevance floors applied and
    how many candidates they (or the retention age limit) left out."""

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


@dataclass(frozen=True, slots=True)
class RetrieveResult:
    """Ranked memories within the token budget, best first."""

    memories: tuple[RetrievedMemory, ...]
    total_tokens: int
    resolution: Resolution
    raw: engine_pb2.RetrieveResponse = field(repr=False, compare=False, hash=False)

    def __iter__(self) -> Iterator[RetrievedMemory]:
        return iter(self.memories)

    def __len__(self) -> int:
        return len(self.memories)


@dataclass(frozen=True, slots=True)
class InjectResult:
    """A chat request body with the user's memories injected.

    `request` is the body to send to the provider (a new dict; the input is never changed);
    with nothing to inject it is the body as given and `skipped_reason` says why. `format`
    is the provider format the server recognized (openai-chat, openai-responses, anthropic,
    gemini) and `role` where the memories went (system slot or a user turn).
    """

    request: dict[str, Any] = field(hash=False)
    injected: bool
    memory_ids: tuple[str, ...]
    tokens: int
    role: str
    format: str
    skipped_reason: str
    below_min_score: int
    skipped_for_age: int
    raw: engine_pb2.InjectResponse = field(repr=False, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class ExtractedFact:
    """A fact the rules found: `category` preference | decision | pattern."""

    category: str
    type: str
    key: str
    content: str


@dataclass(frozen=True, slots=True)
class ExtractResult:
    """Facts extracted from chat text. `stored` counts rows written (with `wait=True`);
    `accepted` is True when storing was handed to the server's background instead."""

    facts: tuple[ExtractedFact, ...]
    stored: int
    accepted: bool
    skipped_reason: str
    raw: engine_pb2.ExtractResponse = field(repr=False, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class ReindexProgress:
    """One message of a reindex: the first has `started` and the `pending` total, then one
    per batch, the last one has `state` done | failed | cancelled (`error` says why it failed)."""

    started: bool
    pending: int
    processed: int
    errors: int
    rate_per_second: float
    eta_seconds: float
    state: str
    error: str
    raw: engine_pb2.ReindexProgress = field(repr=False, compare=False, hash=False)

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed", "cancelled")


@dataclass(frozen=True, slots=True)
class MemorySettings:
    """The server's memory engine settings (every field, normalized). Update them with
    `settings.update(max_tokens=..., ...)`; the names here are the update's keywords."""

    enabled: bool
    max_tokens: int
    retention_days: int
    strategy: str
    scope: str
    skills_enabled: bool
    embedding_source: str
    embedding_provider_model: str | None
    custom_base_url: str | None
    custom_model_id: str | None
    transformers_enabled: bool
    static_enabled: bool
    rerank_enabled: bool
    rerank_provider_model: str | None
    vector_store: str
    primary_backend: str
    fallback_backends: tuple[str, ...]
    backend_configs: Mapping[str, Any] = field(hash=False)
    dedup_on_write: bool
    raw: settings_pb2.MemorySettings = field(repr=False, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One change to a memory, as `memories.history` lists them (oldest first).

    `event` is created | updated | superseded (a keyed add replaced the content; the old fact
    is in `MemoryHistory.versions`) | merged (a duplicate add touched it) | summarized |
    deleted | expired. `author` is the id of the credential that made the change (`oauth:<sub>`
    for an OAuth token, `memsvc` for the expiry sweep; None on a server without tokens).
    `changes` holds the fields the change set, by their API names (`content`, `key`,
    `keep`, ...), with their values after it; a merge names the duplicate's text
    (`mergedContent`); deleted, expired and summarized set none. `related_id` is, for
    `summarized`, the summary it was folded into.
    """

    event: str
    at: datetime
    author: str | None
    changes: Mapping[str, Any] = field(hash=False)
    related_id: str | None
    raw: memory_pb2.MemoryHistoryEntry = field(repr=False, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class MemoryHistory:
    """A memory's whole history (`memories.history(id).read()`): every entry oldest first,
    and the facts its key superseded (`versions`, oldest first, each a `Memory` with
    `valid_from` and `valid_to`). A deleted or expired memory's history is only that entry
    and no versions: forgetting keeps nothing of what it said."""

    id: str
    api_key_id: str
    entries: tuple[HistoryEntry, ...]
    versions: tuple[Memory, ...]

    def __iter__(self) -> Iterator[HistoryEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True, slots=True)
class MemoryEvent:
    """One message of `memories.watch`, in commit order.

    `kind` is created | updated | deleted | expired, or bookmark: no change, only the
    position (the first message of every stream, one every few seconds while nothing changes,
    and the last of a `stop_when_caught_up` stream). Pass an event's `resume_token`, bookmark
    or not, as `watch(resume_token=...)` to continue right after it.

    For a change: `memory_id`, `api_key_id` (its owner), `at`, `author` (as
    `HistoryEntry.author`), `change` (the history event behind it: superseded and merged
    arrive as kind updated, summarized as kind deleted), `changed_fields` (API names) and
    `memory`, the memory as stored when the event was read (None once it is gone; a later
    change may already show in it, its own event follows). A bookmark has only `kind` and
    `resume_token`.
    """

    kind: str
    resume_token: str
    memory_id: str | None
    api_key_id: str | None
    at: datetime | None
    author: str | None
    change: str | None
    changed_fields: tuple[str, ...]
    memory: Memory | None
    related_id: str | None
    raw: memory_pb2.MemoryEvent = field(repr=False, compare=False, hash=False)

    @property
    def is_bookmark(self) -> bool:
        return self.kind == "bookmark"
