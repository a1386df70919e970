"""Work done off the request path: acknowledged writes (Extract without `wait`), run on one
thread (`BackgroundWriter`), and periodic chores (`Ticker`: the expiry sweep, reflections).

Acknowledged work is run on one thread.

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


class Ticker:
    """Runs `fn` every `interval_s` seconds on its own thread, or at once when woken."""

    def __init__(self, name: str, interval_s: float, fn: Callable[[], Any]):
        self._fn = fn
        self._interval = interval_s
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while not self._stopping:
            self._wake.wait(self._interval)
            self._wake.clear()
            if self._stopping:
                return
            try:
                self._fn()
            except Exception as exc:  # noqa: BLE001 - the loop must outlive one failure
                log.error("ticker.failed", extra={"ticker": self._thread.name, "error_type": type(exc).__name__})

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(30)
