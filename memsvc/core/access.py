"""Access counters (ENGINE.md §5 step 6) recorded off the request path.

Every Retrieve returns memories whose access_count and last_accessed_at must move; doing
that inside the request costs a write transaction on the hot path and serializes every
retrieval on the database's single writer. Instead the ids accumulate here and one
background write records all of them, so a burst of retrievals costs one transaction.
The counters are statistics: they may lag a retrieval by one background write.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Callable, Iterable, Mapping

from memsvc.core.background import BackgroundWriter

FAILED = "memory.access.record.failed"


class AccessRecorder:
    def __init__(self, touch: Callable[[Mapping[str, int]], None], background: BackgroundWriter):
        self._touch = touch
        self._background = background
        self._lock = threading.Lock()
        self._pending: Counter[str] = Counter()
        self._scheduled = False

    def record(self, ids: Iterable[str]) -> None:
        with self._lock:
            self._pending.update(ids)
            if self._scheduled or not self._pending:
                return
            self._scheduled = True
        self._background.submit(FAILED, self._flush)

    def _flush(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, Counter()
            self._scheduled = False
        if batch:
            self._touch(batch)
