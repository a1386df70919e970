"""The `memories` row as the storage package reads it: the column list every SELECT uses
and the one function that turns such a row into a Memory. Shared by the memory backend and
the sqlite-vec index, which both return memories."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from memsvc.kernel.models import Memory
from memsvc.storage.database import parse_iso

COLUMNS = (
    "id, memory_id, api_key_id, session_id, type, key, content, metadata, created_at, "
    "updated_at, expires_at, access_count, last_accessed_at, needs_reindex, keep, occurred_at"
)
SELECT = f"SELECT {COLUMNS} FROM memories"
# A write returns the row it left, so nothing has to read it back.
RETURNING = f" RETURNING {COLUMNS}"
M_COLUMNS = ", ".join(f"m.{c.strip()}" for c in COLUMNS.split(","))
NEWEST_FIRST = " ORDER BY created_at DESC, memory_id DESC"


# Where the access counters sit in a COLUMNS row.
_ACCESS_COUNT, _LAST_ACCESSED = 11, 12


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
    row = tuple(row)
    base = _memory_of_row(row[:_ACCESS_COUNT] + row[_LAST_ACCESSED + 1:])
    count, last = int(row[_ACCESS_COUNT]), row[_LAST_ACCESSED]
    return base if count == 0 and last is None else base.with_access(count, parse_iso(last))


@functools.lru_cache(maxsize=16384)
def _memory_of_row(row: tuple[Any, ...]) -> Memory:
    """The Memory of a row without its access counters (they are 0 and None here)."""
    (id_, memory_id, api_key_id, session_id, type_, key, content, metadata, created_at,
     updated_at, expires_at, needs_reindex, keep, occurred_at) = row
    return Memory(
        id=id_,
        memory_id=int(memory_id),
        api_key_id=api_key_id,
        session_id=session_id,
        type=type_,
        key=key,
        content=content,
        metadata=json.loads(metadata) if metadata else {},
        created_at=parse_iso(created_at),
        updated_at=parse_iso(updated_at),
        expires_at=parse_iso(expires_at),
        needs_reindex=bool(needs_reindex),
        keep=bool(keep),
        occurred_at=parse_iso(occurred_at),
    )


def dump_metadata(metadata: dict[str, Any]) -> str:
    return json.dumps(metadata, ensure_ascii=False, separators=(",", ":"))
