"""Counters in the `sequences` table that other processes compare against.

`vec_generation` advances in every transaction that changes vectors or what a vector cache
may assume about them (which owners have nothing waiting for a vector). Each process's
in-memory vector cache remembers the generation it reflects and drops itself when a read
sees a newer one, so a write by any process is seen by every other on its next search.
"""

from __future__ import annotations

from typing import Any

from memsvc.storage.dialect import SQLITE_SQL, Syntax

VEC_GENERATION = "vec_generation"


_BUMP = (
    "INSERT INTO sequences (name, value) VALUES (?, 1) "
    "ON CONFLICT (name) DO UPDATE SET value = sequences.value + 1 RETURNING value"
)


def bump_vec_generation(conn: Any, syntax: Syntax = SQLITE_SQL) -> int:
    """Inside a write transaction: advance `vec_generation` and return the new value (one
    statement, so two processes bumping at once both count)."""
    return int(conn.execute(syntax.sql(_BUMP), (VEC_GENERATION,)).fetchone()[0])


def read_vec_generation(conn: Any, syntax: Syntax = SQLITE_SQL) -> int:
    """The current `vec_generation` (0 before the first bump)."""
    row = conn.execute(syntax.sql("SELECT value FROM sequences WHERE name = ?"), (VEC_GENERATION,)).fetchone()
    return int(row[0]) if row else 0
