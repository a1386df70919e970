"""Counters in the `sequences` table that other processes compare against.

`vec_generation` advances in every transaction that changes vectors or what a vector cache
may assume about them (which owners have nothing waiting for a vector). Each process's
in-memory vector cache remembers the generation it reflects and drops itself when a read
sees a newer one, so a write by any process is seen by every other on its next search.
"""

from __future__ import annotations

from typing import Any

VEC_GENERATION = "vec_generation"


def bump_vec_generation(conn: Any) -> int:
    """Inside a write transaction: advance `vec_generation` and return the new value."""
    return int(conn.execute(
        "INSERT INTO sequences (name, value) VALUES (?, 1) "
        "ON CONFLICT(name) DO UPDATE SET value = value + 1 RETURNING value", (VEC_GENERATION,)).fetchone()[0])


def read_vec_generation(conn: Any) -> int:
    row = conn.execute("SELECT value FROM sequences WHERE name = ?", (VEC_GENERATION,)).fetchone()
    return int(row[0]) if row else 0
