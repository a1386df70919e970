"""Background review tasks: after a flush, the new human messages of a character are read
and turned into reflections, off the request path, one task at a time.

A manual save cancels the character's running review (the history it was reading has
been replaced). A rename drains the character's tasks first (new ones wait), and resumes
them afterwards under the new name, or the old one if the rename did not happen.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from memsvc.characters.common import Hooks

log = logging.getLogger("memsvc.characters.reviews")


@dataclass
class _Task:
    name: str
    texts: list[str]
    cancel: threading.Event = field(default_factory=threading.Event)
    future: Future | None = None


class ReviewRunner:
    def __init__(self, review: Callable[[str, str], None], hooks: Hooks):
        self._review = review
        self._hooks = hooks
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memsvc-review")
        self._lock = threading.Lock()
        self._tasks: dict[str, list[_Task]] = {}
        self._paused: dict[str, list[list[str]]] = {}
        self._closed = False
        self.completed = 0
        self.cancelled = 0

    def submit(self, name: str, texts: list[str]) -> None:
        if not texts:
            return
        with self._lock:
            if self._closed:
                return
            if name in self._paused:
                self._paused[name].append(texts)
                return
            task = _Task(name, list(texts))
            self._tasks.setdefault(name, []).append(task)
            task.future = self._executor.submit(self._run, task)

    def _run(self, task: _Task) -> None:
        try:
            for text in task.texts:
                if task.cancel.is_set():
                    break
                self._hooks.fire("review.message")
                if task.cancel.is_set():
                    break
                self._review(task.name, text)
        except Exception as exc:  # noqa: BLE001 - a failed review is logged, never raised
            log.error("review.failed", extra={"error_type": type(exc).__name__})
        finally:
            with self._lock:
                self._tasks.get(task.name, []).remove(task)
                if task.cancel.is_set():
                    self.cancelled += 1
                else:
                    self.completed += 1

    def cancel(self, name: str) -> None:
        with self._lock:
            for task in self._tasks.get(name, []):
                task.cancel.set()

    def busy(self, name: str) -> bool:
        with self._lock:
            return bool(self._tasks.get(name))

    def drain(self, name: str, timeout_s: float) -> None:
        """Hold new tasks of `name` and wait for its queued and running ones to end."""
        with self._lock:
            self._paused.setdefault(name, [])
            futures = [t.future for t in self._tasks.get(name, []) if t.future is not None]
        _, not_done = wait(futures, timeout=timeout_s)
        if not_done:
            raise TimeoutError(f"{len(not_done)} review task(s) still running after {timeout_s:g}s")

    def resume(self, name: str, rename_to: str | None = None) -> None:
        """Release `name`'s held tasks, under `rename_to` when the character was renamed."""
        with self._lock:
            held = self._paused.pop(name, [])
        for texts in held:
            self.submit(rename_to or name, texts)

    def close(self) -> None:
        """Refuse new tasks and let the queued ones finish (reviews are quick, and those of
        the shutdown flush would otherwise never run)."""
        with self._lock:
            self._closed = True
        self._executor.shutdown(wait=True)
