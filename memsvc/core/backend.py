"""The MemoryBackend protocol: what the core needs from a store, so that
SQLite (the default primary) and later backends plug in without touching the servicers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from memsvc.core.models import Memory, MemoryFilter, MemoryPage, MemoryPatch, NewMemory, UpsertResult

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

    def create_many(self, memories: Sequence[NewMemory],
                    in_transaction: InTransaction | None = None) -> list[UpsertResult]:
        """`create` for several drafts in one transaction: all are stored or none.
        `in_transaction` runs inside it once the rows are written."""

    def create_each(self, memories: Sequence[NewMemory],
                    in_transaction: InTransaction | None = None) -> list[UpsertResult | Exception]:
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
