"""The `memories` row as the storage package reads it: the column list every SELECT uses
and the one function that turns such a row into a Memory. Shared by the memory backend and
the sqlite-vec index, which both return memories."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from memsvc.kernel.models import Memory
from memsvc.storage.database import parse_iso

COLUMNS = (
    "id, memory_id, api_key_id, session_id, type, key, content, metadata, created_at, "
    "updated_at, expires_at, access_count, last_accessed_at, needs_reindex, keep, occurred_at, valid_from"
)
SELECT = f"SELECT {COLUMNS} FROM memories"
# A write returns the row it left, so nothing has to read it back.
RETURNING = f" RETURNING {COLUMNS}"
M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in COLUMNS.split(","))
NEWEST_FIRST = " ORDER BY created_at DESC, memory_id DESC"


# Where the access counters sit in a COLUMNS row.
ACCESS_COUNT, LAST_ACCESSED = 11, 12


def row_to_memory(row: Sequence[Any]) -> Memory:
    """The single place a `COLUMNS` row becomes a Memory.

    Memoized on the row without its access counters: the hot path reads the same owner's
    rows again and again, and building one (JSON metadata, five timestamps, the folded text
    keyword scoring reads) costs about ten times a dictionary lookup. Every retrieval moves
    the counters of what it returned, so a memo keyed on them too would miss on exactly the
    rows retrieval reads most; the counters are set on a cheap copy instead. A row that
    changed in any other column is a new key, so a Memory is always exactly what the row
    says; Memory is immutable and its metadata is never mutated, so sharing one object
    between requests is safe."""
    base = _memory_of_row(without_access(row))
    count, last = int(row[ACCESS_COUNT]), row[LAST_ACCESSED]
    return base if count == 0 and last is None else base.with_access(count, parse_iso(last))


@functools.lru_cache(maxsize=16384)
def _memory_of_row(row: tuple[Any, ...]) -> Memory:
    """The Memory of a row without its access counters (they are 0 and None here)."""
    return build_memory(row, parse_iso, _parse_metadata)


def _parse_metadata(metadata: str | None) -> dict[str, Any]:
    return json.loads(metadata) if metadata else {}


def build_memory(
    row: Sequence[Any],
    time_of: Callable[[Any], Any],
    metadata_of: Callable[[Any], dict[str, Any]],
    access_count: int = 0,
    last_accessed_at: datetime | None = None,
) -> Memory:
    """The one Memory constructor for a row without its access counters (COLUMNS minus
    access_count and last_accessed_at); each database gives how it reads times and metadata."""
    (
        id_,
        memory_id,
        api_key_id,
        session_id,
        type_,
        key,
        content,
        metadata,
        created_at,
        updated_at,
        expires_at,
        needs_reindex,
        keep,
        occurred_at,
        valid_from,
    ) = row
    return Memory(
        id=id_,
        memory_id=int(memory_id),
        api_key_id=api_key_id,
        session_id=session_id,
        type=type_,
        key=key,
        content=content,
        metadata=metadata_of(metadata),
        created_at=time_of(created_at),
        updated_at=time_of(updated_at),
        expires_at=time_of(expires_at),
        access_count=access_count,
        last_accessed_at=last_accessed_at,
        needs_reindex=bool(needs_reindex),
        keep=bool(keep),
        occurred_at=time_of(occurred_at),
        valid_from=time_of(valid_from),
    )


def without_access(row: Sequence[Any]) -> tuple[Any, ...]:
    """A COLUMNS row without its access counters (the memo's key, build_memory's input)."""
    row = tuple(row)
    return row[:ACCESS_COUNT] + row[LAST_ACCESSED + 1 :]


def dump_metadata(metadata: dict[str, Any]) -> str:
    """Metadata as stored: compact JSON, non-ASCII kept as is."""
    return json.dumps(metadata, ensure_ascii=False, separators=(",", ":"))
