"""The change feed (WatchMemories): a follower gets every change of its tenants' memories as
it commits, in order, each with a token to resume from.

Why it is built on the history: every change is already a row of the memories' history,
written in the change's own transaction, in the order a follower must see (memsvc.storage.
lifecycle says how the position is kept per database). So the feed is a read of that log
after a position; a follower that reconnects with its last token continues right after it,
across processes and replicas, and nothing is kept per follower on the server.

Why a slow follower cannot grow the server's memory: a follower's stream reads its next page
of events only once the previous page was written to it, and gRPC writes wait for the
follower's flow-control window. A follower that stops reading therefore holds one page here
and its backlog stays in the store, where it resumes reading when the follower does (or
after reconnecting with its token). Nothing is dropped and nothing is buffered per follower.

Waiting: one poll of the store's head per process (`HeadSignal`, every `poll_s` while someone
waits) wakes every caught-up follower when anything committed, from this process or any
other; a follower that waited `heartbeat_s` without a change gets a bookmark (its position),
which keeps proxies from cutting an idle stream and lets it save its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memsvc.core.credentials import current_scope
from memsvc.core.memories import MAX_ID_CHARS, NO_HISTORY
from memsvc.kernel.changes import FeedEvent, FeedPage
from memsvc.kernel.errors import PreconditionError, ValidationError

DEFAULT_POLL_S = 0.25
DEFAULT_HEARTBEAT_S = 10.0
PAGE_SIZE = 100

#: Runs a blocking store read off the event loop (memsvc.api.blocking.run).
Run = Callable[..., Awaitable[Any]]


class FeedStore(Protocol):
    def feed_head(self) -> str: ...

    def feed(self, token: str, owners: Sequence[str] | None, limit: int) -> FeedPage: ...


@dataclass(frozen=True)
class Bookmark:
    """No change: the follower's position (send it back as the resume token)."""

    token: str


class HeadSignal:
    """Wakes waiting followers when the store's head moves. One poller per process, alive
    only while someone waits; `generation` counts the moves it saw."""

    def __init__(self, poll_s: float) -> None:
        self._poll_s = poll_s
        self.generation = 0
        self._head: str | None = None
        self._waiters = 0
        self._moved: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    async def wait(self, seen: int, timeout: float, head: Callable[[], Awaitable[str]]) -> None:
        """Until the head moved after generation `seen` was read, or `timeout` passed."""
        if self.generation > seen:
            return
        if self._moved is None:
            self._moved = asyncio.Event()
        moved = self._moved
        self._waiters += 1
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._poll(head))
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(moved.wait(), timeout)
        finally:
            self._waiters -= 1

    async def aclose(self) -> None:
        """Stop the poller (the server is stopping: no follower waits any more)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _poll(self, head: Callable[[], Awaitable[str]]) -> None:
        while self._waiters > 0:
            with contextlib.suppress(Exception):  # a failed poll is tried again; waiters time out meanwhile
                current = await head()
                if current != self._head:
                    self._head = current
                    self.generation += 1
                    moved, self._moved = self._moved, asyncio.Event()
                    if moved is not None:
                        moved.set()
            await asyncio.sleep(self._poll_s)


class ChangeFeed:
    """WatchMemories' engine over the built-in store, which holds the feed only while
    `keeps_history()` (it is the primary backend)."""

    def __init__(
        self,
        store: FeedStore,
        keeps_history: Callable[[], bool] = lambda: True,
        poll_s: float = DEFAULT_POLL_S,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._store = store
        self._keeps_history = keeps_history
        self._heartbeat_s = heartbeat_s
        self._page_size = page_size
        self._signal = HeadSignal(poll_s)

    async def aclose(self) -> None:
        """Release the loop's poller when the server stops."""
        await self._signal.aclose()

    def owners(self, api_key_id: str) -> frozenset[str] | None:
        """Whose events a follower gets: the apiKeyId it names (the access rules checked it
        may), else every tenant its credential covers (None: every tenant)."""
        if len(api_key_id) > MAX_ID_CHARS:
            raise ValidationError.single("apiKeyId", f"must be at most {MAX_ID_CHARS} characters")
        if api_key_id:
            return frozenset({api_key_id})
        scope = current_scope()
        return None if scope is None else scope.tenants

    async def follow(
        self, api_key_id: str, token: str, stop_when_caught_up: bool, run: Run
    ) -> AsyncIterator[FeedEvent | Bookmark]:
        """A bookmark of where the stream starts, the follower's events after `token` (empty:
        from now), then, as they commit, the new ones; with `stop_when_caught_up`, until it has
        them all (a last bookmark)."""
        if not self._keeps_history():
            raise PreconditionError(NO_HISTORY, reason="NO_HISTORY")
        owners = self.owners(api_key_id)
        listed = None if owners is None else sorted(owners)
        position = token or await run(self._store.feed_head)

        async def read(after: str) -> tuple[int, FeedPage]:
            # The head's generation before the read: a change committed after it wakes the wait.
            seen = self._signal.generation
            return seen, await run(self._store.feed, after, listed, self._page_size)

        # Read before the first message: a token this store did not issue is refused as the
        # call's status, never after a stream (which a REST client reads as 200) has begun.
        seen, page = await read(position)
        yield Bookmark(position)  # where the stream starts: a client may save it at once
        quiet_since = time.monotonic()
        while True:
            for event in page.events:
                yield event
            position = page.token
            if page.events:
                quiet_since = time.monotonic()
            if len(page.events) < self._page_size:  # caught up: wait for the next change
                if stop_when_caught_up:
                    yield Bookmark(position)
                    return
                if time.monotonic() - quiet_since >= self._heartbeat_s:
                    yield Bookmark(position)
                    quiet_since = time.monotonic()
                left = self._heartbeat_s - (time.monotonic() - quiet_since)
                await self._signal.wait(seen, max(left, 0.0), lambda: run(self._store.feed_head))
            seen, page = await read(position)
