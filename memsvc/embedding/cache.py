"""The embedding cache: in-process LRU with a TTL, keyed
`source:model:dim:sha256(text)`, with hit/miss counters for engine status.

Least recently *used* is evicted when full (a hit moves an entry to the back); an expired
entry is a miss and is dropped when seen. One lock guards everything: every operation is a
few dictionary steps.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

import numpy as np


def cache_key(source: str, model: str, dim: int | None, text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{source}:{model}:{dim}:{digest}"


class EmbeddingCache:
    def __init__(self, max_entries: int = 1000, ttl_ms: int = 300_000, clock: Callable[[], float] = time.monotonic):
        if max_entries < 0 or ttl_ms < 0:
            raise ValueError("max_entries and ttl_ms must not be negative")
        self.max_entries = int(max_entries)
        self.ttl_s = ttl_ms / 1000.0
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def get(self, key: str) -> np.ndarray | None:
        vector = self.peek(key)
        self.count(hits=int(vector is not None), misses=int(vector is None))
        return vector

    def peek(self, key: str) -> np.ndarray | None:
        """A lookup that leaves the counters alone: a caller that may give up before it
        embeds (an inline call about to hand over to a worker) counts once it goes on."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] <= self._clock():
                del self._entries[key]
                entry = None
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def count(self, hits: int = 0, misses: int = 0) -> None:
        """Counts lookups; one that could not even be keyed (dimension not known yet) is a miss."""
        with self._lock:
            self.hits += hits
            self.misses += misses

    def put(self, key: str, vector: np.ndarray) -> None:
        if self.max_entries == 0 or self.ttl_s <= 0:
            return
        stored = np.array(vector, dtype=np.float32, copy=True)
        stored.setflags(write=False)  # shared between callers: nobody may change it in place
        with self._lock:
            self._entries[key] = (self._clock() + self.ttl_s, stored)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
                self.evictions += 1

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def stats(self) -> dict[str, int]:
        """{hits, misses, size}: size counts live entries (expired ones are purged first)."""
        with self._lock:
            now = self._clock()
            for key in [k for k, (expires, _) in self._entries.items() if expires <= now]:
                del self._entries[key]
            return {"hits": self.hits, "misses": self.misses, "size": len(self._entries)}
