"""pgvector's owners in memory: each searched owner's vectors as an `OwnerBlock` (the matrix
the sqlite-vec tier searches, memsvc.storage.vector_cache), built from one snapshot read and
kept current through the per-owner change log of migrations/postgres/0002, the log the
keyword working sets follow (memsvc.storage.postgres.working_set_port).

Why: pgvector answers one owner's nearest neighbours by walking the HNSW graph of every
owner's vectors (or by sorting the owner's rows), about 3 ms a search for an owner of 10k
facts (bench/replicas_bench.py), where the same owner's matrix in memory is a fraction of a
millisecond, as on SQLite.

Coherence. A block records the owner's change number it reflects (`version`). A search reads
the owner's number in its snapshot (once per snapshot, shared with the working set) and:
- equal: the block is current;
- greater: another request, process or replica wrote since: the memories changed after the
  block's version are read with their vectors in one statement and applied (or, when the log
  no longer reaches back that far, the block is built again);
- smaller: the snapshot is older than the block (a request that began before a write this
  process already applied): the block answers, as the working set does.
Every write that changes what a block holds moves the owner's number: a memory written,
updated, flagged or deleted (the triggers of migration 0002), and a vector stored or deleted
without its memory row changing (PgVectorSql.upsert records those itself). A table recreated for a
new embedding signature counts one more `generation` in memory_vector_state: every block is
dropped. The filter columns (session, creation, expiry, keep) come from the memory rows, which
the search re-checks anyway, so a block never needs the vectors' copies of them.

Memory. The blocks share one budget (LRU over owners); an owner whose block alone would be
over it is searched by pgvector (its build is tried again a minute later).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from memsvc.storage.dialect import POSTGRES_SQL
from memsvc.storage.postgres.database import PgDatabase
from memsvc.storage.postgres.working_set_port import CHANGE_LOG_VERSIONS
from memsvc.storage.vector_cache import OwnerBlock, OwnerBlocks, VectorChange, scope_columns
from memsvc.storage.working_set_port import owner_version

#: An owner too large for the budget is searched by pgvector; its build is tried again this
#: long after the last try (a build reads every vector of the owner).
TOO_BIG_RETRY_S = 60.0
#: What one vector costs a block besides its dim float32s (id, times, session code, slot).
_ROW_BYTES = 40
#: `vector_send` (pgvector's binary form): int16 dimension, int16 unused, then the
#: components as big-endian float32.
_HEADER = 4
_COLUMNS = "m.memory_id, m.session_id, m.created_at, m.expires_at, m.keep, m.needs_reindex, vector_send(v.embedding)"
_LOAD = (
    f"SELECT {_COLUMNS} FROM memories m LEFT JOIN memory_vectors v ON v.memory_id = m.memory_id WHERE m.api_key_id = %s"
)
# Each memory changed after `since`, with its row and vector when it still exists in the
# owner (NULLs when not). The snapshot that read the owner's number holds exactly the log rows
# up to it.
_CHANGES = (
    f"SELECT c.memory_id, m.memory_id IS NOT NULL, {_COLUMNS.replace('m.memory_id, ', '', 1)} FROM "
    "(SELECT DISTINCT memory_id FROM memory_owner_changes WHERE api_key_id = %(owner)s AND seq > %(since)s) c "
    "LEFT JOIN memories m ON m.memory_id = c.memory_id AND m.api_key_id = %(owner)s "
    "LEFT JOIN memory_vectors v ON v.memory_id = m.memory_id"
)
_COUNT = "SELECT count(*) FROM memories WHERE api_key_id = %s"


def _vector(raw: bytes | None, dim: int) -> np.ndarray | None:
    """A stored vector of this dimension as float32 (None: none, or of another dimension,
    which a table recreated meanwhile would hold)."""
    if raw is None or len(raw) != _HEADER + 4 * dim:
        return None
    return np.frombuffer(raw, dtype=">f4", offset=_HEADER)


def _change(memory_id: int, row: Sequence[Any], dim: int) -> VectorChange:
    """(session, created_at, expires_at, keep, needs_reindex, vector) as a VectorChange."""
    session, created, expires, keep, flagged, raw = row
    vector = _vector(raw, dim)
    return VectorChange(
        int(memory_id), vector, bool(flagged) or vector is None, scope_columns(session, created, expires, bool(keep))
    )


class PgVectorBlocks:
    """The process's owner blocks for one PgDatabase (see the module docstring)."""

    def __init__(self, db: PgDatabase, max_bytes: int) -> None:
        self.db = db
        self.blocks = OwnerBlocks(max_bytes)
        self._lock = threading.Lock()
        self._generation: int | None = None
        self._too_big: dict[str, float] = {}
        self.builds = 0
        self.updates = 0

    def current(self, conn: Any, owner: str, dim: int, generation: int) -> OwnerBlock | None:
        """The owner's block as this snapshot (`conn`, with the vector table's `dim` and
        `generation` read in it) sees it; None when pgvector must answer (an owner over the
        budget, or a snapshot older than the table the blocks were built from)."""
        if not self._same_table(generation):
            return None
        with self.blocks.lock_for(owner):
            tried = self._too_big.get(owner)
            if tried is not None and time.monotonic() - tried < TOO_BIG_RETRY_S:
                return None
            version = owner_version(conn, owner, POSTGRES_SQL, self.db)
            block = self.blocks.get(owner)
            if (
                block is not None
                and block.dim == dim
                and (block.version >= version or self._apply(conn, owner, block, version, dim))
            ):
                return block
            return self._build(conn, owner, dim, version)

    def _same_table(self, generation: int) -> bool:
        """Blocks hold vectors of one generation of the table: a newer one drops them all; a
        snapshot of an older one is answered by pgvector."""
        with self._lock:
            if self._generation is None or generation > self._generation:
                self.blocks.clear()
                self._too_big.clear()
                self._generation = generation
            return generation == self._generation

    def _apply(self, conn: Any, owner: str, block: OwnerBlock, version: int, dim: int) -> bool:
        """Bring `block` to `version` from the change log; False when the log no longer
        reaches the block's version."""
        if block.version < version - CHANGE_LOG_VERSIONS:
            return False
        rows = conn.execute(_CHANGES, {"owner": owner, "since": block.version}).fetchall()
        removed = [int(r[0]) for r in rows if not r[1]]
        block.apply_changes(removed, [_change(r[0], r[2:], dim) for r in rows if r[1]], version)
        self.updates += 1
        self.blocks.refit()
        return True

    def _build(self, conn: Any, owner: str, dim: int, version: int) -> OwnerBlock | None:
        count = int(conn.execute(_COUNT, (owner,)).fetchone()[0])
        if not self.blocks.fits(count * (4 * dim + _ROW_BYTES)):
            self._too_big[owner] = time.monotonic()
            self.blocks.drop(owner)
            return None
        rows = conn.execute(_LOAD, (owner,)).fetchall()
        usable = [r for r in rows if _vector(r[6], dim) is not None]
        n = len(usable)
        scopes = [scope_columns(r[1], r[2], r[3], bool(r[4])) for r in usable]
        block = OwnerBlock.from_vectors(
            dim,
            np.fromiter((r[0] for r in usable), dtype=np.int64, count=n),
            np.frombuffer(b"".join(r[6][_HEADER:] for r in usable), dtype=">f4"),
            [s[0] for s in scopes],
            np.fromiter((s[1] for s in scopes), dtype=np.int64, count=n),
            np.fromiter((s[2] for s in scopes), dtype=np.int64, count=n),
        )
        block.pending = {int(r[0]) for r in rows if r[5] or _vector(r[6], dim) is None}
        block.version = version
        self.builds += 1
        self._too_big.pop(owner, None)
        self.blocks.keep(owner, block)
        return block  # this snapshot's answer even if the budget could not keep it

    def stats(self) -> dict[str, int]:
        return self.blocks.stats() | {"builds": self.builds, "updates": self.updates}
