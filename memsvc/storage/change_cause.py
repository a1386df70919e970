"""The cause of a write (who and why: memsvc.kernel.changes) as the history triggers of the
memories read it: on SQLite through memsvc_change(name), a function every memsvc connection
registers, reading what the writing thread bound; on PostgreSQL through settings local to the
write transaction. Kept apart from memsvc.storage.lifecycle because the SQLite connections
(memsvc.storage.database) register the function before any store exists."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memsvc.kernel.changes import ChangeCause

#: SQL name of the function the SQLite triggers read the bound cause through.
CHANGE_FUNCTION = "memsvc_change"

_BOUND = threading.local()


def _bound(name: str) -> str | None:
    values: dict[str, str | None] = getattr(_BOUND, "values", {})
    return values.get(name)


def register(conn: Any) -> None:
    """Give a SQLite connection the function its history triggers call."""
    conn.create_scalar_function(CHANGE_FUNCTION, _bound, 1, deterministic=False)


@contextmanager
def bound_on_this_thread(cause: ChangeCause, at: str | None) -> Iterator[None]:
    """The cause SQLite's triggers see for the writes this thread makes inside the block (the
    writer connection is used by one thread at a time, under its lock)."""
    previous = getattr(_BOUND, "values", {})
    _BOUND.values = {
        "author": cause.author,
        "reason": cause.reason,
        "related": cause.related,
        "detail": cause.detail,
        "at": at,
    }
    try:
        yield
    finally:
        _BOUND.values = previous


SET_CAUSE = (
    "SELECT set_config('memsvc.author', %s, true), set_config('memsvc.reason', %s, true), "
    "set_config('memsvc.related', %s, true), set_config('memsvc.detail', %s, true)"
)


def set_cause_in_transaction(conn: Any, cause: ChangeCause) -> None:
    """PostgreSQL: the cause as settings local to the write transaction (its triggers read them)."""
    conn.execute(SET_CAUSE, (cause.author, cause.reason, cause.related or "", cause.detail or ""))
