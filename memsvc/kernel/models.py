"""Plain domain objects shared by the core, the storage backends and the API conversion."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from memsvc.kernel.text import normalize

MEMORY_TYPES = ("factual", "episodic", "procedural", "semantic")
DEFAULT_MEMORY_TYPE = "factual"


def utcnow() -> datetime:
    return datetime.now(UTC)


def estimate_tokens(text: str) -> int:
    """ceil(chars / 4): the budget unit of the spec ("abcd" → 1, "abcde" → 2)."""
    return -(-len(text) // 4)


@dataclass(frozen=True)
class Memory:
    id: str
    memory_id: int
    api_key_id: str
    session_id: str | None
    type: str
    key: str | None
    content: str
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    access_count: int = 0
    last_accessed_at: datetime | None = None
    needs_reindex: bool = False
    #: Kept with no age limit: retention (retentionDays) never hides it; expiry still applies.
    keep: bool = False
    #: When the thing this memory records happened (the time a chat turn was said), as its
    #: writer gave it; None when not known. created_at is when memsvc stored it.
    occurred_at: datetime | None = None
    #: Since when this version of the memory holds, when a keyed create replaced an earlier
    #: fact (None: since it happened, `happened_at`).
    valid_from: datetime | None = None
    #: Until when it held: set only on a version a later fact superseded (asOf retrieval).
    valid_to: datetime | None = None

    @property
    def valid_since(self) -> datetime:
        """When this version of the memory became true, as well as it is known."""
        return self.valid_from or self.happened_at

    def valid_at(self, moment: datetime) -> bool:
        """Whether this version held at `moment`: [valid_since, valid_to)."""
        return self.valid_since <= moment and (self.valid_to is None or moment < self.valid_to)

    @property
    def happened_at(self) -> datetime:
        """When the recorded thing happened, as well as it is known: occurred_at, else
        created_at. Signals about when something happened (a date a question names, the
        neighbouring turns of a session) read this; retention does not (it is measured on
        created_at, so a history imported today with old times is not hidden as old)."""
        return self.occurred_at or self.created_at

    def with_access(self, access_count: int, last_accessed_at: datetime | None) -> Memory:
        """This memory with other access counters. Every retrieval moves the counters of
        what it returned, while its text stays as it was: the copy keeps the text already
        folded for keyword scoring instead of folding it again."""
        self.folded  # noqa: B018 - folded once here, on the memo's object, not again on every copy
        copy = object.__new__(Memory)
        copy.__dict__.update(self.__dict__, access_count=access_count, last_accessed_at=last_accessed_at)
        return copy

    @cached_property
    def folded(self) -> tuple[str, str, str]:
        """Content, key and metadata values normalized for keyword scoring. Computed once per
        object: storage hands out one Memory per row version, so a row read by
        many retrievals is folded once."""
        return normalize(self.content), normalize(self.key or ""), normalize(_metadata_text(self.metadata))


def _metadata_text(value: Any) -> str:
    """The metadata's values, not its keys: matching the JSON itself would make every
    query containing "source" or "language" hit every extracted fact."""
    if isinstance(value, dict):
        return " ".join(_metadata_text(v) for v in value.values())
    if isinstance(value, list):
        return " ".join(_metadata_text(v) for v in value)
    return "" if value is None else str(value)


@dataclass(frozen=True)
class NewMemory:
    """A validated create request. With a key, it upserts on (api_key_id, key)."""

    api_key_id: str
    content: str
    type: str = DEFAULT_MEMORY_TYPE
    session_id: str | None = None
    key: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    expires_at: datetime | None = None
    #: Kept with no age limit. None: not said — false for a new memory, unchanged by an upsert.
    keep: bool | None = None
    #: When the recorded thing happened. None: not known — unset for a new memory, unchanged
    #: by an upsert.
    occurred_at: datetime | None = None
    #: Who writes it (a credential id; memsvc.kernel.changes): carried on the draft because
    #: concurrent callers' drafts are written together, by one of them.
    author: str = field(default="", compare=False)
    #: Store nothing new: touch this existing memory of the owner instead (a duplicate found
    #: by memsvc.core.dedup). When it is gone by the time of the write, the draft is stored.
    merge_into: str | None = field(default=None, compare=False)
    #: Store nothing new: touch the memory an earlier draft of the same write became (its
    #: index among the write's drafts), which this one repeats. When that draft failed, this
    #: one is stored.
    repeats: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class MemoryPatch:
    """A validated update: only these six fields may change; None leaves a field alone."""

    type: str | None = None
    key: str | None = None
    content: str | None = None
    metadata: dict[str, Any] | None = None
    #: Kept with no age limit (True), or under retentionDays again (False).
    keep: bool | None = None
    #: When the recorded thing happened (there is no way back to "not known").
    occurred_at: datetime | None = None

    def is_empty(self) -> bool:
        return (
            self.type is None
            and self.key is None
            and self.content is None
            and self.metadata is None
            and self.keep is None
            and self.occurred_at is None
        )


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories a list or clear applies to. `q` matches content or key, any case."""

    api_key_id: str | None = None
    session_id: str | None = None
    type: str | None = None
    q: str | None = None
    created_before: datetime | None = None
    #: With no api_key_id: only these owners (a confined caller's tenants); None = any.
    owners: frozenset[str] | None = None


@dataclass(frozen=True)
class UpsertResult:
    id: str
    created: bool
    #: The row as the write left it (what derived indexes need, without reading it back).
    memory: Memory | None = field(default=None, compare=False, repr=False)
    #: Nothing new was stored: a duplicate touched the existing memory `id` instead.
    merged: bool = False


@dataclass(frozen=True)
class MemoryPage:
    """One page of a filtered listing plus aggregates over the whole filtered set."""

    data: list[Memory]
    total: int
    by_type: dict[str, int]
    tokens_used: int


@dataclass(frozen=True)
class SearchScope:
    """Which memories retrieval may return: one owner (None = every
    owner, scope global), optionally one session, never expired, never older than the
    retention window (`created_after`; None = no age limit) unless kept."""

    api_key_id: str | None
    now: datetime
    created_after: datetime | None = None
    session_only: bool = False
    session_id: str | None = None


@dataclass(frozen=True)
class KeywordHit:
    memory: Memory
    # Higher is better: bm25 (the negated FTS5 bm25; for an owner's word match, bm25 with the
    # owner's own document frequencies).
    score: float
