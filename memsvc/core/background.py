"""Work acknowledged before it is done (Extract without `wait`), run on one thread.

One thread keeps background writes in arrival order and off the request path; `drain`
lets shutdown finish them before the database closes. A failure is logged (type only, never
memory contents) and never reaches the caller, who was already answered.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

log = logging.getLogger("memsvc.core.background")


class BackgroundWriter:
    def __init__(self, name: str = "memsvc-background"):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._pending: set[Future[Any]] = set()
        self.failures = 0

    def submit(self, event: str, fn: Callable[..., Any], *args: Any) -> None:
        """Run fn(*args) later; on failure log `event` (e.g. memory.extraction.background.failed)."""
        future = self._pool.submit(fn, *args)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(lambda f: self._done(f, event))

    def _done(self, future: Future[Any], event: str) -> None:
        with self._lock:
            self._pending.discard(future)
        exc = future.exception()
        if exc is not None:
            self.failures += 1
            log.error(event, extra={"error_type": type(exc).__name__})

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def drain(self) -> None:
        """Finish everything submitted so far, then refuse new work."""
        self._pool.shutdown(wait=True)
