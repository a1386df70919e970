"""Who changes a memory and why: the cause every write carries into the memory's history.

Why a context and not an argument: a write reaches the store through many paths (the CRUD
façade, extraction, summarization, the expiry sweep, a character rename), and the history
must name the credential behind each of them. The API layer knows the credential; the store
records it. The cause travels between them as a context variable, set where a use case
starts (`caused_by`), so the many store methods keep their signatures. A batch written on
behalf of several callers at once (the group commit of concurrent creates) carries each
draft's author on the draft itself (`NewMemory.author`), since one thread writes them all.

The history's event names and the change feed's kinds are defined here, once, for the store,
the core and the conversion to the wire.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

#: History events (memory_history.event).
CREATED = "created"
UPDATED = "updated"
#: A keyed create replaced the content: the old fact's version is kept with its validity.
SUPERSEDED = "superseded"
#: A duplicate write touched this memory instead of adding a row.
MERGED = "merged"
DELETED = "deleted"
EXPIRED = "expired"
#: Folded into a summary (`related` names it); the memory is gone, its history stays.
SUMMARIZED = "summarized"
EVENTS = (CREATED, UPDATED, SUPERSEDED, MERGED, DELETED, EXPIRED, SUMMARIZED)

#: The change feed's kinds: what a follower of the memories does with an event.
FEED_KINDS = {
    CREATED: "created",
    UPDATED: "updated",
    SUPERSEDED: "updated",
    MERGED: "updated",
    DELETED: "deleted",
    SUMMARIZED: "deleted",
    EXPIRED: "expired",
}

#: Reasons a write gives the store, beyond a plain create, update or delete.
UPSERT = "upsert"  # a keyed create: a changed content supersedes the old fact
#: Writes memsvc makes on its own (the expiry sweep, summaries) name this author.
SYSTEM_AUTHOR = "memsvc"


@dataclass(frozen=True)
class ChangeCause:
    """`author`: the credential id ("" with authentication off); `reason`: one of UPSERT,
    MERGED, SUMMARIZED, EXPIRED or "" (the statement's own kind); `related`: the memory a
    merge or a summary went into; `detail`: the text a merged duplicate said."""

    author: str = ""
    reason: str = ""
    related: str | None = None
    detail: str | None = None


_CAUSE: contextvars.ContextVar[ChangeCause | None] = contextvars.ContextVar("memsvc_change_cause", default=None)
_NO_CAUSE = ChangeCause()


def current_cause() -> ChangeCause:
    """The cause of the writes this context makes."""
    return _CAUSE.get() or _NO_CAUSE


def set_author(author: str) -> None:
    """The author of every write of the current context from here on (the API layer calls it
    once per request, with the verified credential's id; each request runs in its own task,
    so it ends with the request)."""
    _CAUSE.set(replace(current_cause(), author=author))


@contextmanager
def caused_by(**changes: Any) -> Iterator[ChangeCause]:
    """Writes inside the block carry the current cause with `changes` applied."""
    cause = replace(current_cause(), **changes)
    token = _CAUSE.set(cause)
    try:
        yield cause
    finally:
        _CAUSE.reset(token)


@dataclass(frozen=True)
class MemoryChange:
    """One entry of a memory's history: what happened (`event`), when, by whom, and the
    fields it set, by their API names, with their values after the change (a creation sets
    every field; an update the ones it changed; a deletion none: the text is forgotten)."""

    seq: int
    memory_id: str
    api_key_id: str
    event: str
    at: datetime
    author: str
    changes: dict[str, Any] = field(default_factory=dict)
    related: str | None = None


@dataclass(frozen=True)
class FeedEvent:
    """A history entry as the change feed delivers it: with its position (`token`), and,
    for a memory that still exists, the memory as stored now."""

    token: str
    change: MemoryChange
    memory: Any = None  # memsvc.kernel.models.Memory | None

    @property
    def kind(self) -> str:
        return FEED_KINDS[self.change.event]


@dataclass(frozen=True)
class FeedPage:
    """Events after a position, oldest first, and the position after the last one read (the
    store's newest when no event matched: a follower's token moves on without events)."""

    events: list[FeedEvent]
    token: str
