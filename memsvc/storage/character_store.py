"""SQL of the character-memory API: path generations, the append journal, and the rows a
character rename re-owns (migration 0003). The rules live in `memsvc.characters`; this
module only reads and writes rows, each public method in one transaction."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import apsw

from memsvc.kernel.changes import current_cause
from memsvc.kernel.models import utcnow
from memsvc.storage.change_cause import bound_on_this_thread
from memsvc.storage.database import Database, iso


@dataclass(frozen=True)
class GenerationRow:
    path: str
    generation: int
    active: bool
    signature: str | None


@dataclass(frozen=True)
class PendingRow:
    id: int
    role: str
    text: str
    consumed_by: str | None


@dataclass
class RenameBackup:
    """What a rename's database step changed, so that a later failure can undo exactly it."""

    memory_ids: list[str] = field(default_factory=list)
    reflection_ids: list[int] = field(default_factory=list)
    pending_ids: list[int] = field(default_factory=list)
    generations: dict[str, GenerationRow | None] = field(default_factory=dict)


def _generation(row: Sequence[Any] | None) -> GenerationRow | None:
    if row is None:
        return None
    return GenerationRow(row[0], int(row[1]), bool(row[2]), row[3])


_UPSERT_GENERATION = (
    "INSERT INTO recent_generations (path, generation, active, signature, updated_at) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT(path) DO UPDATE SET generation = excluded.generation, active = excluded.active, "
    "signature = excluded.signature, updated_at = excluded.updated_at"
)


class CharacterStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- generations ---------------------------------------------------------------------

    def generation(self, path: str) -> GenerationRow | None:
        with self.db.read() as conn:
            return _generation(
                conn.execute(
                    "SELECT path, generation, active, signature FROM recent_generations WHERE path = ?", (path,)
                ).fetchone()
            )

    def set_generation(self, path: str, generation: int, active: bool, signature: str | None) -> None:
        with self.db.write() as conn:
            conn.execute(_UPSERT_GENERATION, (path, generation, int(active), signature, iso(utcnow())))

    def activate(self, path: str, signature: str | None) -> int:
        """Next generation for `path`, now active: it was created, reused or restored."""
        with self.db.write() as conn:
            return self._activate_in(conn, path, signature)

    @staticmethod
    def _activate_in(conn: apsw.Connection, path: str, signature: str | None) -> int:
        row = conn.execute("SELECT generation FROM recent_generations WHERE path = ?", (path,)).fetchone()
        generation = (int(row[0]) if row else 0) + 1
        conn.execute(_UPSERT_GENERATION, (path, generation, 1, signature, iso(utcnow())))
        return generation

    def deactivate(self, paths: Sequence[str]) -> None:
        """The files are gone: the next activation of these paths is a new identity."""
        with self.db.write() as conn:
            for path in paths:
                conn.execute(
                    "UPDATE recent_generations SET active = 0, signature = NULL, updated_at = ? "
                    "WHERE path = ? AND active = 1",
                    (iso(utcnow()), path),
                )

    def active_paths(self, paths: Sequence[str]) -> list[str]:
        with self.db.read() as conn:
            return [
                p
                for p in paths
                if conn.execute("SELECT 1 FROM recent_generations WHERE path = ? AND active = 1", (p,)).fetchone()
            ]

    # -- the append journal --------------------------------------------------------------

    def add_pending(self, character: str, messages: Sequence[tuple[str, str]]) -> int:
        """Journal the messages (committed when this returns); the character's pending count."""
        now = iso(utcnow())
        with self.db.write() as conn:
            for role, text in messages:
                conn.execute(
                    "INSERT INTO recent_pending (character, role, text, accepted_at) VALUES (?, ?, ?, ?)",
                    (character, role, text, now),
                )
            return int(
                conn.execute("SELECT count(*) FROM recent_pending WHERE character = ?", (character,)).fetchone()[0]
            )

    def pending(self, character: str) -> list[PendingRow]:
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT id, role, text, consumed_by FROM recent_pending WHERE character = ? ORDER BY id", (character,)
            ).fetchall()
        return [PendingRow(int(r[0]), r[1], r[2], r[3]) for r in rows]

    def pending_characters(self) -> list[str]:
        with self.db.read() as conn:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT character FROM recent_pending GROUP BY character ORDER BY min(id)"
                ).fetchall()
            ]

    def mark_consumed(self, ids: Sequence[int], fingerprint: str | None) -> None:
        """Tag rows with the fingerprint of the write about to include them (None untags)."""
        with self.db.write() as conn:
            conn.executemany("UPDATE recent_pending SET consumed_by = ? WHERE id = ?", [(fingerprint, i) for i in ids])

    def delete_pending(self, ids: Sequence[int]) -> None:
        with self.db.write() as conn:
            conn.executemany("DELETE FROM recent_pending WHERE id = ?", [(i,) for i in ids])

    # -- what a character owns -----------------------------------------------------------

    def owns_rows(self, character: str, owner: str) -> bool:
        """Memories, reflections or pending appends stored under this character."""
        with self.db.read() as conn:
            for sql, value in (
                ("SELECT 1 FROM memories WHERE api_key_id = ? LIMIT 1", owner),
                ("SELECT 1 FROM reflections WHERE character = ? LIMIT 1", character),
                ("SELECT 1 FROM recent_pending WHERE character = ? LIMIT 1", character),
            ):
                if conn.execute(sql, (value,)).fetchone():
                    return True
        return False

    def rename_rows(
        self,
        old: str,
        new: str,
        old_owner: str,
        new_owner: str,
        moves: Sequence[tuple[str, str, str | None]],
        step: Callable[[str], None],
    ) -> RenameBackup:
        """Re-own every row of `old` and move path generations, in one transaction: `step`
        (called before each part, may raise) aborting it leaves the database untouched.
        `moves` are (old path, new path, new file signature)."""
        backup = RenameBackup()
        # The memories' history records the move to the new owner, by whom it was asked.
        with self.db.write() as conn, bound_on_this_thread(current_cause(), iso(utcnow())):
            step("memories")
            backup.memory_ids = [
                r[0] for r in conn.execute("SELECT id FROM memories WHERE api_key_id = ?", (old_owner,)).fetchall()
            ]
            conn.execute("UPDATE memories SET api_key_id = ? WHERE api_key_id = ?", (new_owner, old_owner))
            step("reflections")
            backup.reflection_ids = [
                int(r[0]) for r in conn.execute("SELECT id FROM reflections WHERE character = ?", (old,)).fetchall()
            ]
            conn.execute("UPDATE reflections SET character = ? WHERE character = ?", (new, old))
            step("pending")
            backup.pending_ids = [
                int(r[0]) for r in conn.execute("SELECT id FROM recent_pending WHERE character = ?", (old,)).fetchall()
            ]
            conn.execute("UPDATE recent_pending SET character = ? WHERE character = ?", (new, old))
            step("generations")
            self._move_generations(conn, moves, backup)
        return backup

    def _move_generations(
        self, conn: apsw.Connection, moves: Sequence[tuple[str, str, str | None]], backup: RenameBackup
    ) -> None:
        now = iso(utcnow())
        for old_path, new_path, signature in moves:
            for path in (old_path, new_path):
                if path not in backup.generations:
                    backup.generations[path] = _generation(
                        conn.execute(
                            "SELECT path, generation, active, signature FROM recent_generations WHERE path = ?", (path,)
                        ).fetchone()
                    )
            conn.execute(
                "UPDATE recent_generations SET active = 0, signature = NULL, updated_at = ? WHERE path = ?",
                (now, old_path),
            )
            self._activate_in(conn, new_path, signature)

    def undo_rename_rows(
        self, old: str, old_owner: str, backup: RenameBackup, restored: Sequence[tuple[str, str | None]]
    ) -> None:
        """Give the rows back to `old` and restore the generation rows; every path in
        `restored` ((path, signature) put back on disk) is re-activated with a new generation."""
        with self.db.write() as conn, bound_on_this_thread(current_cause(), iso(utcnow())):
            conn.executemany(
                "UPDATE memories SET api_key_id = ? WHERE id = ?", [(old_owner, i) for i in backup.memory_ids]
            )
            conn.executemany(
                "UPDATE reflections SET character = ? WHERE id = ?", [(old, i) for i in backup.reflection_ids]
            )
            conn.executemany(
                "UPDATE recent_pending SET character = ? WHERE id = ?", [(old, i) for i in backup.pending_ids]
            )
            now = iso(utcnow())
            for path, row in backup.generations.items():
                if row is None:
                    conn.execute("DELETE FROM recent_generations WHERE path = ?", (path,))
                else:
                    conn.execute(_UPSERT_GENERATION, (path, row.generation, int(row.active), row.signature, now))
            for path, signature in restored:
                self._activate_in(conn, path, signature)

    def activate_restored(self, restored: Sequence[tuple[str, str | None]]) -> None:
        """Paths a rollback put back on disk while the database step had not committed."""
        with self.db.write() as conn:
            for path, signature in restored:
                self._activate_in(conn, path, signature)
