"""Calls that run on the caller's own thread only while nothing in them waits.

A Retrieve of an owner whose working set is in memory is about a millisecond of arithmetic
over arrays plus page-cache reads of the local SQLite file. Handing such a call to a worker
thread and back costs the server almost half as much again (a thread wake-up, a queue, a
wake-up of the event loop), so the API runs it on the event loop's thread first, inside
`inline()`. Every step of the core that would wait — a network call (remote embedding,
rerank, a remote backend, PostgreSQL, Qdrant), a long computation (a local transformer
model, building an owner's working set or vector block), a write, or a lock another thread
holds — calls `may_block` (or takes its lock with `hold`) first. Inside an inline call that
raises WouldBlock before the step does anything, and the API runs the whole call again on a
worker thread, where nothing raises.

So a step that can wait must ask before it has changed anything the call's second run would
see twice. Reads qualify as they are; Retrieve and Inject record access only at their end;
what a read keeps for later (an embedding cached, a lookup counted) goes through `settle`,
which an abandoned first run never reaches.

WouldBlock is a BaseException: the core turns many failures into fallbacks (a failed
embedding becomes a keyword search), and none of those handlers may swallow it.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# Inside an inline call: the effects `settle` keeps until the call has run to its end.
_INLINE: contextvars.ContextVar[list[Callable[[], None]] | None] = contextvars.ContextVar("memsvc_inline", default=None)


class WouldBlock(BaseException):
    """An inline call reached a step that waits; `args[0]` says which (a fixed phrase)."""

    @property
    def step(self) -> str:
        return str(self.args[0]) if self.args else ""


@contextmanager
def inline() -> Iterator[None]:
    """Run the block as an inline call: `may_block` raises instead of letting it wait, and
    the effects handed to `settle` happen only when the block ends without an exception."""
    effects: list[Callable[[], None]] = []
    token = _INLINE.set(effects)
    try:
        yield
    finally:
        _INLINE.reset(token)
    for effect in effects:
        effect()


def is_inline() -> bool:
    return _INLINE.get() is not None


def may_block(step: str) -> None:
    """Call before a step that waits; inside an inline call it raises WouldBlock(step)."""
    if _INLINE.get() is not None:
        raise WouldBlock(step)


def settle(effect: Callable[[], None]) -> None:
    """Run `effect` now, or, inside an inline call, once the call has completed: a first run
    that hands over to a worker must leave nothing its second run would see or count twice."""
    effects = _INLINE.get()
    if effects is None:
        effect()
    else:
        effects.append(effect)


@contextmanager
def hold(lock: threading.Lock, step: str = "a lock another thread holds") -> Iterator[None]:
    """`with lock`, except that an inline call raises WouldBlock instead of waiting for it."""
    if _INLINE.get() is not None:
        if not lock.acquire(blocking=False):
            raise WouldBlock(step)
    else:
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
