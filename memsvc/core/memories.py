"""Memory CRUD: validation, the read cache, pagination and the health round trip, over any
`MemoryBackend`. This is what MemoryService's CRUD RPCs call; it never sees protobuf."""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

from memsvc.core.credentials import confined
from memsvc.core.group_commit import GroupCommit
from memsvc.core.retention import default_keep
from memsvc.kernel.backend import InTransaction, MemoryBackend
from memsvc.kernel.cache import CacheStats, TtlCache
from memsvc.kernel.changes import MemoryChange, current_cause
from memsvc.kernel.errors import NotFoundError, PreconditionError, ValidationError, Violations, shorten, storage_full
from memsvc.kernel.models import (
    DEFAULT_MEMORY_TYPE,
    MEMORY_TYPES,
    Memory,
    MemoryFilter,
    MemoryPage,
    MemoryPatch,
    NewMemory,
    UpsertResult,
    utcnow,
)

MAX_CONTENT_BYTES = 32 * 1024
MAX_KEY_CHARS = 512
MAX_METADATA_BYTES = 16 * 1024
MAX_ID_CHARS = 256
MAX_QUERY_CHARS = 1024
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
# Far beyond any real listing, and small enough that page numbers stay int32 on the wire.
MAX_OFFSET = 1_000_000_000
MAX_PAGE = 10_000_000
# Owners starting with this prefix belong to memsvc itself (the health round trip).
RESERVED_OWNER_PREFIX = "__memsvc"
HEALTH_OWNER = "__memsvc_health__"  # each probe adds ":<uuid>", so probes never collide
HEALTH_KEY = "__extraction_test__"
HEALTH_CONTENT = "pipeline verification test"
# Under this much free space in the data directory, CheckHealth reports the store as not
# working: writes are about to fail (or already fail) for lack of space.
LOW_SPACE_BYTES = 1024 * 1024
UPDATABLE_FIELDS = ("type", "key", "content", "metadata", "keep", "occurredAt")
# How far after now an occurredAt may lie: a writer's clock (or time zone slip) may run a
# little ahead of ours; a time beyond that is a mistake, not something that happened.
OCCURRED_AT_LEEWAY = timedelta(days=1)
# At most this many concurrent creates share one transaction.
CREATE_BATCH = 128
# A page of a memory's history: 1..MAX_HISTORY_LIMIT entries, DEFAULT_HISTORY_LIMIT by default.
DEFAULT_HISTORY_LIMIT = 100
MAX_HISTORY_LIMIT = 1000
NO_HISTORY = "history, valid time and the change feed are kept by the built-in store, which is not the primary backend"
# At most this many items in one CreateMemories call: an import of a large history is sent in
# chunks of this size. One call is one write transaction, so the bound keeps the writer lock
# (which every other write waits for) and the request (at most ~16 MiB on the wire) small.
MAX_BATCH_ITEMS = 1000

log = logging.getLogger("memsvc.core.memories")


class CreateFollowUp(Protocol):
    """What derived indexes (vectors) do for one batch of drafts being stored."""

    def in_transaction(self, txn: Any, stored: Sequence[Memory | None]) -> None:
        """Inside the write transaction that stored the drafts (`stored[i]` is the row
        drafts[i] left, None if it failed), so derived rows commit with the memories. Must
        not raise for a problem of its own (it defers instead): that would fail the batch."""

    def committed(self, stored: Sequence[Memory]) -> None:
        """After the commit (work that must not hold the transaction). Must not raise."""


class MemoryEvents(Protocol):
    """How derived indexes (vectors) follow memory text. `creating` is asked before drafts
    are stored, outside any transaction (slow work such as embedding happens there), and
    its follow-up joins the write; `written` is told after text was written by other paths
    and `rescoped` after what filters a vector changed without its text (keep): neither may
    raise, the write having committed."""

    def creating(self, drafts: Sequence[NewMemory]) -> CreateFollowUp: ...

    def written(self, ids: Sequence[str]) -> None: ...

    def rescoped(self, memories: Sequence[Memory]) -> None: ...


class DuplicateMarker(Protocol):
    """Marks drafts that repeat an existing memory (memsvc.core.duplicates.Duplicates)."""

    def mark(self, drafts: Sequence[NewMemory], vectors: Any = None) -> list[NewMemory]: ...


class NoFollowUp:
    #: No vectors were made for the drafts.
    vectors = None

    def in_transaction(self, txn: Any, stored: Sequence[Memory | None]) -> None:
        return None

    def committed(self, stored: Sequence[Memory]) -> None:
        return None


class NoEvents:
    def creating(self, drafts: Sequence[NewMemory]) -> CreateFollowUp:
        return NoFollowUp()

    def written(self, ids: Sequence[str]) -> None:
        return None

    def rescoped(self, memories: Sequence[Memory]) -> None:
        return None


class DraftStore(Protocol):
    """What `store_drafts` writes through: a MemoryBackend, or the engine's store."""

    def create_many(
        self, memories: Sequence[NewMemory], in_transaction: InTransaction | None = None
    ) -> list[UpsertResult]: ...

    def create_each(
        self, memories: Sequence[NewMemory], in_transaction: InTransaction | None = None
    ) -> list[UpsertResult | Exception]: ...


def store_drafts(
    backend: DraftStore,
    events: MemoryEvents,
    drafts: Sequence[NewMemory],
    *,
    each: bool,
    duplicates: DuplicateMarker | None = None,
) -> list[UpsertResult | Exception]:
    """Store validated drafts in one transaction, with what `events` derives from them
    (their vectors) in the same transaction. `each`: every draft succeeds or fails on its
    own (its slot then holds the exception); otherwise all are stored or none (raises).
    `duplicates`: a draft that repeats an existing memory merges into it instead."""
    follow_up = events.creating(drafts)
    if duplicates is not None:
        drafts = duplicates.mark(drafts, getattr(follow_up, "vectors", None))
    outcomes: list[UpsertResult | Exception]
    if each:
        outcomes = backend.create_each(drafts, follow_up.in_transaction)
    else:
        outcomes = [*backend.create_many(drafts, follow_up.in_transaction)]
    follow_up.committed([o.memory for o in outcomes if isinstance(o, UpsertResult) and o.memory is not None])
    return outcomes


@dataclass(frozen=True)
class ListQuery:
    filter: MemoryFilter
    limit: int | None = None
    page: int | None = None
    offset: int | None = None


@dataclass(frozen=True)
class MemoryListing:
    page: MemoryPage
    page_number: int
    limit: int
    total_pages: int
    cache: CacheStats


class HistoryStore(Protocol):
    """The built-in store's record of what happened to memories (memsvc.storage.lifecycle)."""

    def history(self, memory_id: str, after: int, limit: int) -> list[MemoryChange]: ...

    def history_owner(self, memory_id: str) -> str | None: ...

    def versions(self, memory_id: str) -> list[Memory]: ...


@dataclass(frozen=True)
class MemoryHistory:
    """One page of a memory's history, with the facts its key superseded."""

    memory_id: str
    api_key_id: str
    entries: list[MemoryChange]
    versions: list[Memory]
    next_page_token: str = ""


@dataclass(frozen=True)
class HealthReport:
    working: bool
    latency_ms: int
    error: str | None = None


def _check_owner(v: Violations, field_name: str, value: str | None, *, required: bool) -> None:
    if not value:
        if required:
            v.add(field_name, "is required")
        return
    if len(value) > MAX_ID_CHARS:
        v.add(field_name, f"must be at most {MAX_ID_CHARS} characters")
    if field_name == "apiKeyId" and value.startswith(RESERVED_OWNER_PREFIX):
        v.add(field_name, f"owners starting with {RESERVED_OWNER_PREFIX!r} are reserved")


def _check_type(v: Violations, value: str | None) -> None:
    if value is not None and value not in MEMORY_TYPES:
        v.add("type", f"must be one of {', '.join(MEMORY_TYPES)}")


def _check_content(v: Violations, value: str | None) -> None:
    if value is None or not value.strip():
        v.add("content", "must not be empty")
    elif len(value.encode("utf-8")) > MAX_CONTENT_BYTES:
        v.add("content", f"must be at most {MAX_CONTENT_BYTES} bytes (UTF-8)")


def _check_key(v: Violations, value: str | None) -> None:
    if value is not None and len(value) > MAX_KEY_CHARS:
        v.add("key", f"must be at most {MAX_KEY_CHARS} characters")


def _check_metadata(v: Violations, value: Mapping[str, Any] | None) -> None:
    if not value:  # most memories have none: "{}" is within every limit, no need to serialize it
        return
    try:
        serialized = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:
        v.add("metadata", "numbers must be finite (no NaN or Infinity)")
        return
    size = len(serialized.encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        v.add("metadata", f"must serialize to at most {MAX_METADATA_BYTES} bytes, got {size}")


def _check_occurred_at(v: Violations, value: datetime | None, now: datetime | None = None) -> None:
    if value is not None and value > (now or utcnow()) + OCCURRED_AT_LEEWAY:
        v.add("occurredAt", "is in the future")


def validate_new(draft: NewMemory, now: datetime | None = None) -> NewMemory:
    """Check every limit at once and normalize ("" → None, default type; a durable fact is
    kept unless the draft says otherwise, memsvc.core.retention)."""
    v = Violations()
    memory = replace(
        draft,
        type=draft.type or DEFAULT_MEMORY_TYPE,
        key=draft.key or None,
        session_id=draft.session_id or None,
        metadata=dict(draft.metadata or {}),
    )
    _check_owner(v, "apiKeyId", memory.api_key_id, required=True)
    _check_owner(v, "sessionId", memory.session_id, required=False)
    _check_type(v, memory.type)
    _check_key(v, memory.key)
    _check_content(v, memory.content)
    _check_metadata(v, memory.metadata)
    if memory.expires_at is not None and memory.expires_at <= (now or utcnow()):
        v.add("expiresAt", "must be in the future")
    _check_occurred_at(v, memory.occurred_at, now)
    v.raise_if_any()
    return replace(memory, keep=default_keep(memory.keep, memory.key, memory.type))


def check_batch_size(count: int) -> None:
    """A batch call carries 1..MAX_BATCH_ITEMS items; otherwise the whole call is refused."""
    if not 1 <= count <= MAX_BATCH_ITEMS:
        raise ValidationError.single("memories", f"must hold 1 to {MAX_BATCH_ITEMS} items, got {count}")


def _validated_or_error(draft: NewMemory) -> NewMemory | ValidationError:
    try:
        return validate_new(draft)
    except ValidationError as exc:
        return exc


def validate_patch(changes: Mapping[str, Any]) -> MemoryPatch:
    """Only type, key, content, metadata, keep and occurredAt may change; naming any other
    field is refused (rather than silently ignored) so a client learns its expiry edit did
    not happen."""
    v = Violations()
    for name in changes:
        if name not in UPDATABLE_FIELDS:
            v.add(name, f"cannot be updated; only {', '.join(UPDATABLE_FIELDS)} can")
    if not changes:
        v.add("body", f"nothing to update; set one of {', '.join(UPDATABLE_FIELDS)}")
    if "type" in changes:
        _check_type(v, changes["type"])
    if "content" in changes:
        _check_content(v, changes["content"])
    if "key" in changes:
        _check_key(v, changes["key"])
    if "metadata" in changes:
        _check_metadata(v, changes["metadata"])
    if "keep" in changes and not isinstance(changes["keep"], bool):
        v.add("keep", "must be true or false")
    if "occurredAt" in changes:
        _check_occurred_at(v, changes["occurredAt"])
    v.raise_if_any()
    return MemoryPatch(
        type=changes.get("type"),
        key=changes.get("key"),
        content=changes.get("content"),
        metadata=dict(changes["metadata"]) if "metadata" in changes else None,
        keep=changes.get("keep"),
        occurred_at=changes.get("occurredAt"),
    )


def validate_filter(flt: MemoryFilter, *, owner_required: bool) -> MemoryFilter:
    v = Violations()
    _check_owner(v, "apiKeyId", flt.api_key_id, required=owner_required)
    _check_owner(v, "sessionId", flt.session_id, required=False)
    _check_type(v, flt.type or None)
    if flt.q and len(flt.q) > MAX_QUERY_CHARS:
        v.add("q", f"must be at most {MAX_QUERY_CHARS} characters")
    v.raise_if_any()
    return replace(
        flt,
        api_key_id=flt.api_key_id or None,
        session_id=flt.session_id or None,
        type=flt.type or None,
        q=flt.q or None,
    )


def resolve_paging(limit: int | None, page: int | None, offset: int | None) -> tuple[int, int, int]:
    """(limit, offset, page number); an explicit offset wins over page."""
    v = Violations()
    if limit is not None and not 1 <= limit <= MAX_LIMIT:
        v.add("limit", f"must be between 1 and {MAX_LIMIT}")
    if page is not None and not 1 <= page <= MAX_PAGE:
        v.add("page", f"must be between 1 and {MAX_PAGE}")
    if offset is not None and not 0 <= offset <= MAX_OFFSET:
        v.add("offset", f"must be between 0 and {MAX_OFFSET}")
    v.raise_if_any()
    size = limit or DEFAULT_LIMIT
    if offset is not None:
        return size, offset, offset // size + 1
    number = page or 1
    return size, (number - 1) * size, number


class Memories:
    """The CRUD façade. The read cache sits in front of `get` and is invalidated on every
    write that can change a cached row."""

    def __init__(
        self,
        backend: MemoryBackend,
        read_cache: TtlCache[Memory] | None = None,
        events: MemoryEvents | None = None,
        max_batch: int = CREATE_BATCH,
        changes: Callable[[], Hashable] | None = None,
        history: HistoryStore | None = None,
        keeps_history: Callable[[], bool] = lambda: True,
        duplicates: DuplicateMarker | None = None,
    ):
        """`changes`: the database's change counter (see TtlCache's `version`), so a row
        cached here follows a write made through another server process at once. `history`:
        the built-in store's record, which holds the memories only while `keeps_history()`
        (the built-in store is the primary backend)."""
        self.backend = backend
        self._history = history
        self._keeps_history = keeps_history
        self._duplicates = duplicates
        self.read_cache: TtlCache[Memory] = read_cache or TtlCache(max_entries=500, ttl_s=60.0, version=changes)
        self.events: MemoryEvents = events or NoEvents()
        #: Concurrent creates share one transaction (see memsvc.core.group_commit).
        self.creates: GroupCommit[NewMemory, UpsertResult] = GroupCommit(self._create_batch, max_batch)

    def create(self, draft: NewMemory) -> UpsertResult:
        """Validated here, then stored with the creates of other callers that arrive
        meanwhile, in one transaction with their vectors; returns once that committed."""
        result = self.creates.submit(authored(validate_new(draft)))
        self.read_cache.invalidate(result.id)  # an upsert changed an existing row
        return result

    def _create_batch(self, drafts: list[NewMemory]) -> list[UpsertResult | Exception]:
        return store_drafts(self.backend, self.events, drafts, each=True, duplicates=self._duplicates)

    def create_batch(self, items: Sequence[NewMemory | Exception]) -> list[UpsertResult | Exception]:
        """Several creates in one call, each with its own outcome in order: an item that is
        invalid (or arrives as the error its decoding raised) fails alone, and the valid ones
        are stored exactly as `create` stores them (upserts by key, earlier items of the same
        call included), in one transaction with their vectors embedded in one call. A
        failure of the transaction itself (a full disk) raises: then nothing was stored."""
        check_batch_size(len(items))
        checked = [item if isinstance(item, Exception) else _validated_or_error(authored(item)) for item in items]
        valid = [item for item in checked if isinstance(item, NewMemory)]
        stored = iter(
            store_drafts(self.backend, self.events, valid, each=True, duplicates=self._duplicates) if valid else []
        )
        outcomes = [next(stored) if isinstance(item, NewMemory) else item for item in checked]
        for outcome in outcomes:
            if isinstance(outcome, UpsertResult):
                self.read_cache.invalidate(outcome.id)  # an upsert changed an existing row
        return outcomes

    def get(self, memory_id: str) -> Memory:
        memory = self.read_cache.get_or_load(memory_id, lambda: self.backend.get(memory_id)) if memory_id else None
        if memory is None:
            raise memory_not_found(memory_id)
        return memory

    # Writes invalidate after they commit (a read racing the write cannot re-cache the old
    # row: see TtlCache.get_or_load), so once a write returns every read sees it.

    def update(self, memory_id: str, changes: Mapping[str, Any]) -> Memory:
        patch = validate_patch(changes)
        try:
            memory = self.backend.update(memory_id, patch) if memory_id else None
        finally:
            self.read_cache.invalidate(memory_id)
        if memory is None:
            raise memory_not_found(memory_id)
        if patch.content is not None or patch.key is not None:  # metadata alone: same vector
            self.events.written([memory.id])
        elif patch.keep is not None:  # same text, same vector: only what retention compares moves
            self.events.rescoped([memory])
        return memory

    def delete(self, memory_id: str) -> None:
        try:
            deleted = bool(memory_id) and self.backend.delete(memory_id)
        finally:
            self.read_cache.invalidate(memory_id)
        if not deleted:
            raise memory_not_found(memory_id)

    def clear(self, flt: MemoryFilter) -> int:
        count = self.backend.clear(validate_filter(flt, owner_required=True))
        self.read_cache.clear()
        return count

    def list(self, query: ListQuery) -> MemoryListing:
        limit, offset, number = resolve_paging(query.limit, query.page, query.offset)
        page = self.backend.list(confined(validate_filter(query.filter, owner_required=False)), limit, offset)
        return MemoryListing(page, number, limit, math.ceil(page.total / limit), self.read_cache.stats())

    def owner_of(self, memory_id: str) -> str | None:
        """The apiKeyId a memory belongs to, None if there is no such memory (an id keeps its
        owner for life, so the read cache may answer); for a memory that is gone, the owner
        its history is kept under (its history is still its owner's to read)."""
        try:
            return self.get(memory_id).api_key_id
        except NotFoundError:
            return self._history.history_owner(memory_id) if memory_id and self._history is not None else None

    def history(self, memory_id: str, limit: int | None = None, page_token: str = "") -> MemoryHistory:
        """One page of a memory's history (oldest first) and its superseded versions."""
        size, after = _history_page(limit, page_token)
        if self._history is None or not self._keeps_history():
            raise PreconditionError(NO_HISTORY, reason="NO_HISTORY")
        entries = self._history.history(memory_id, after, size + 1) if memory_id else []
        if not entries and after == 0:
            raise memory_not_found(memory_id)
        more = len(entries) > size
        entries = entries[:size]
        owner = entries[0].api_key_id if entries else (self.owner_of(memory_id) or "")
        return MemoryHistory(
            memory_id,
            owner,
            entries,
            self._history.versions(memory_id),
            str(entries[-1].seq) if more else "",
        )

    def check_health(self) -> HealthReport:
        """Create → list → delete under the reserved owner; the row is removed whatever
        happens, so a failed probe leaves nothing behind."""
        started = time.perf_counter()
        created: UpsertResult | None = None
        owner = f"{HEALTH_OWNER}:{uuid.uuid4().hex}"
        try:
            created = self.backend.create(
                NewMemory(api_key_id=owner, key=HEALTH_KEY, content=HEALTH_CONTENT, metadata={"probe": True})
            )
            found = self.backend.list(MemoryFilter(api_key_id=owner), limit=10, offset=0)
            if not any(m.id == created.id for m in found.data):
                return HealthReport(False, _elapsed_ms(started), "created memory was not listed")
            problem = _space_problem(self.backend)
            return HealthReport(problem is None, _elapsed_ms(started), problem)
        except Exception as exc:  # the probe reports failures; it must not raise them
            full = storage_full(exc)
            return HealthReport(False, _elapsed_ms(started), full.message if full else f"{type(exc).__name__}: {exc}")
        finally:
            if created is not None:
                try:
                    self.backend.delete(created.id)
                except Exception:  # a failed clean-up must not mask the probe's own result
                    log.warning("health.cleanup_failed", exc_info=True, extra={"memory_id": created.id})


def authored(draft: NewMemory) -> NewMemory:
    """The draft with the author of the current request (drafts of several callers are
    written together by one of them, so each carries its own)."""
    return replace(draft, author=draft.author or current_cause().author)


def _history_page(limit: int | None, page_token: str) -> tuple[int, int]:
    """(entries per page, the seq the page starts after)."""
    v = Violations()
    if limit is not None and not 1 <= limit <= MAX_HISTORY_LIMIT:
        v.add("limit", f"must be between 1 and {MAX_HISTORY_LIMIT}")
    if page_token and not (page_token.isdigit() and len(page_token) <= 18):
        v.add("pageToken", "is not a page token of this history")
    v.raise_if_any()
    return limit or DEFAULT_HISTORY_LIMIT, int(page_token or 0)


def memory_not_found(memory_id: str) -> NotFoundError:
    return NotFoundError(f"memory {shorten(memory_id)!r} not found")


def _space_problem(backend: MemoryBackend) -> str | None:
    """Why the store is (nearly) full, or None: the round trip can still succeed in pages
    SQLite already holds while history files and larger writes fail for lack of space."""
    free = backend.health().get("free_bytes")
    if isinstance(free, int) and free < LOW_SPACE_BYTES:
        return (
            f"storage is nearly full: {free} bytes free in the data directory; writes are refused "
            "(RESOURCE_EXHAUSTED, STORAGE_FULL) once none is left"
        )
    return None


def _elapsed_ms(started: float) -> int:
    return int(round((time.perf_counter() - started) * 1000))
