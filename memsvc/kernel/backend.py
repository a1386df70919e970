"""The MemoryBackend protocol: what the core needs from a store, so that
SQLite (the default primary) and later backends plug in without touching the servicers."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from memsvc.kernel.models import Memory, MemoryFilter, MemoryPage, MemoryPatch, NewMemory, SearchScope, UpsertResult

#: Runs inside the transaction that stores drafts: (a transaction handle only the derived
#: index's own storage code uses, the rows as written with None for a draft that failed).
InTransaction = Callable[[Any, list[Memory | None]], None]


@runtime_checkable
class MemoryBackend(Protocol):
    name: str

    def initialize(self) -> None:
        """Prepare the store (migrations, connections). Idempotent."""

    def shutdown(self) -> None:
        """Release connections; after this the backend is unusable."""

    def create(self, memory: NewMemory) -> UpsertResult:
        """Insert, or update in place the row with the same (api_key_id, key), merging
        metadata shallowly."""

    def create_many(
        self, memories: Sequence[NewMemory], in_transaction: InTransaction | None = None
    ) -> list[UpsertResult]:
        """`create` for several drafts in one transaction: all are stored or none.
        `in_transaction` runs inside it once the rows are written."""

    def create_each(
        self, memories: Sequence[NewMemory], in_transaction: InTransaction | None = None
    ) -> list[UpsertResult | Exception]:
        """As `create_many` (one transaction), but each draft is stored or fails on its own:
        a failed draft's slot holds its exception and the others are stored."""

    def get(self, memory_id: str) -> Memory | None: ...

    def update(self, memory_id: str, patch: MemoryPatch) -> Memory | None:
        """Apply the patch; None when the id does not exist."""

    def delete(self, memory_id: str) -> bool: ...

    def clear(self, flt: MemoryFilter) -> int:
        """Delete every memory matching the filter; return how many."""

    def list(self, flt: MemoryFilter, limit: int, offset: int) -> MemoryPage:
        """Newest first; aggregates cover the whole filtered set, not just the page."""

    def health(self) -> dict[str, object]:
        """A cheap probe of the store itself: {"ok": bool, ...details}."""


# ---- pluggable backends (everything but SQLite): what the routing manager needs ----


class BackendError(Exception):
    """A pluggable backend failed (unreachable, timed out, an HTTP error, an answer it could
    not read). The message names the host at most: never a URL path, a key or a body."""


@dataclass(frozen=True)
class BackendHealth:
    ok: bool
    latency_ms: float = 0.0
    error: str = ""


@dataclass(frozen=True)
class BackendSearch:
    """A retrieval handed to a backend's own search: the query, whose memories (scope), how
    many and within which token budget. Results are filtered by the scope again on return,
    so a backend that ignores a filter cannot leak another owner's memories."""

    query: str
    scope: SearchScope
    limit: int = 20
    max_tokens: int = 2000
    strategy: str = "hybrid"


@dataclass(frozen=True)
class ScoredMemory:
    memory: Memory
    score: float = 0.0


@runtime_checkable
class PluggableBackend(Protocol):
    """A memory store behind a remote API. Every method raises BackendError when the store
    cannot answer; "not there" is None / False, never an error."""

    name: str
    kind: str

    def initialize(self) -> None:
        """Check the store is reachable and usable (raises BackendError when not)."""

    def shutdown(self) -> None: ...

    def create(self, memory: NewMemory) -> UpsertResult: ...

    def get(self, memory_id: str) -> Memory | None: ...

    def update(self, memory_id: str, patch: MemoryPatch) -> Memory | None: ...

    def delete(self, memory_id: str) -> bool: ...

    def list(self, flt: MemoryFilter, limit: int, offset: int) -> MemoryPage: ...

    def clear(self, flt: MemoryFilter) -> int: ...

    def search(self, request: BackendSearch) -> builtins.list[ScoredMemory]: ...

    def health(self) -> BackendHealth: ...
