"""SQL of the `reflections` table (migration 0003): the review's facts on their way from
pending through confirmed to promoted (or denied). The lifecycle rules are in
`memsvc.characters.reflections`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memsvc.storage.database import Database, iso, parse_iso

_COLUMNS = (
    "id, character, fact_key, polarity, category, type, content, evidence, status, seen_count, "
    "first_seen_at, last_seen_at, confirmed_at, promoted_at, denied_at, memory_id"
)


@dataclass(frozen=True)
class NewReflection:
    character: str
    fact_key: str
    polarity: int
    category: str
    type: str
    content: str
    evidence: str


@dataclass(frozen=True)
class ReflectionRow(NewReflection):
    """A stored reflection: what was seen, and where it is in its lifecycle."""

    id: int
    status: str
    seen_count: int
    first_seen_at: datetime
    last_seen_at: datetime
    confirmed_at: datetime | None
    promoted_at: datetime | None
    denied_at: datetime | None
    memory_id: str | None


def _row(r: Sequence[Any]) -> ReflectionRow:
    first_seen, last_seen = parse_iso(r[10]), parse_iso(r[11])
    assert first_seen is not None and last_seen is not None  # NOT NULL, set by insert()
    return ReflectionRow(
        r[1],
        r[2],
        int(r[3]),
        r[4],
        r[5],
        r[6],
        r[7],
        id=int(r[0]),
        status=r[8],
        seen_count=int(r[9]),
        first_seen_at=first_seen,
        last_seen_at=last_seen,
        confirmed_at=parse_iso(r[12]),
        promoted_at=parse_iso(r[13]),
        denied_at=parse_iso(r[14]),
        memory_id=r[15],
    )


class ReflectionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def live(self, character: str, fact_key: str, polarity: int) -> ReflectionRow | None:
        """The reflection not denied for this (character, fact, polarity), if any."""
        with self.db.read() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM reflections WHERE character = ? AND fact_key = ? "
                "AND polarity = ? AND status <> 'denied'",
                (character, fact_key, polarity),
            ).fetchone()
        return _row(row) if row else None

    def insert(self, new: NewReflection, now: datetime) -> int:
        stamp = iso(now)
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO reflections (character, fact_key, polarity, category, type, content, evidence, "
                "status, seen_count, first_seen_at, last_seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 1, ?, ?)",
                (
                    new.character,
                    new.fact_key,
                    new.polarity,
                    new.category,
                    new.type,
                    new.content,
                    new.evidence,
                    stamp,
                    stamp,
                ),
            )
            return int(conn.last_insert_rowid())

    def seen_again(self, reflection_id: int, now: datetime) -> None:
        """One more message showed the fact; a pending one becomes confirmed now."""
        stamp = iso(now)
        with self.db.write() as conn:
            conn.execute(
                "UPDATE reflections SET seen_count = seen_count + 1, last_seen_at = ?, "
                "status = CASE status WHEN 'pending' THEN 'confirmed' ELSE status END, "
                "confirmed_at = CASE status WHEN 'pending' THEN ? ELSE confirmed_at END WHERE id = ?",
                (stamp, stamp, reflection_id),
            )

    def deny(self, reflection_id: int, now: datetime) -> None:
        with self.db.write() as conn:
            conn.execute(
                "UPDATE reflections SET status = 'denied', denied_at = ? WHERE id = ?", (iso(now), reflection_id)
            )

    def mark_promoted(self, reflection_id: int, memory_id: str, now: datetime) -> None:
        with self.db.write() as conn:
            conn.execute(
                "UPDATE reflections SET status = 'promoted', promoted_at = ?, memory_id = ? "
                "WHERE id = ? AND status IN ('pending', 'confirmed')",
                (iso(now), memory_id, reflection_id),
            )

    def get(self, reflection_id: int) -> ReflectionRow | None:
        with self.db.read() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM reflections WHERE id = ?", (reflection_id,)).fetchone()
        return _row(row) if row else None

    def confirmed_before(self, cutoff: datetime, character: str | None = None) -> list[ReflectionRow]:
        """Confirmed reflections whose confirmed_at is at or before `cutoff` (due by age)."""
        sql = f"SELECT {_COLUMNS} FROM reflections WHERE status = 'confirmed' AND confirmed_at <= ?"
        params: list[Any] = [iso(cutoff)]
        if character is not None:
            sql += " AND character = ?"
            params.append(character)
        with self.db.read() as conn:
            return [_row(r) for r in conn.execute(sql + " ORDER BY id", params).fetchall()]

    def reset_confirmed_at(self, now: datetime) -> int:
        """Every confirmed reflection of every character starts its age clock again now."""
        with self.db.write() as conn:
            conn.execute("UPDATE reflections SET confirmed_at = ? WHERE status = 'confirmed'", (iso(now),))
            return int(conn.changes())

    def of_character(self, character: str) -> list[ReflectionRow]:
        with self.db.read() as conn:
            return [
                _row(r)
                for r in conn.execute(
                    f"SELECT {_COLUMNS} FROM reflections WHERE character = ? ORDER BY id", (character,)
                ).fetchall()
            ]
