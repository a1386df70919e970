"""A small TTL cache whose eviction rule is: when full, drop the oldest
20 % at once (cheaper than one eviction per insert under a write burst)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

V = TypeVar("V")


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    size: int

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class TtlCache(Generic[V]):
    """Thread-safe; entries expire `ttl_s` after they were stored.

    `version`: when given, called before each lookup; a value different from the last one
    empties the cache. A cache of stored rows passes the store's change counter, so a write
    committed by any process (other server processes share the database) is seen by the
    next lookup here, not only the writes this process invalidates itself."""

    def __init__(
        self,
        max_entries: int,
        ttl_s: float,
        evict_fraction: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
        version: Callable[[], Hashable] | None = None,
    ):
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max = max_entries
        self._ttl = ttl_s
        self._evict = max(1, int(max_entries * evict_fraction))
        self._clock = clock
        self._items: dict[Hashable, tuple[float, V]] = {}
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        # Bumped by every invalidation; see get_or_load.
        self._epoch = 0
        self._version = version
        self._seen_version: Hashable = None

    def get(self, key: Hashable) -> V | None:
        self._follow_version()
        with self._lock:
            item = self._items.get(key)
            if item is not None and item[0] > self._clock():
                self._hits += 1
                return item[1]
            if item is not None:
                del self._items[key]
            self._misses += 1
            return None

    def get_or_load(self, key: Hashable, load: Callable[[], V | None]) -> V | None:
        """The cached value, or load() stored for next time. A value loaded while an
        invalidation happened is returned but not stored: it may predate the write that
        invalidated, and caching it would serve the old row after the write returned."""
        cached = self.get(key)
        if cached is not None:
            return cached
        with self._lock:
            epoch = self._epoch
        value = load()
        if value is not None:
            self.put(key, value, epoch)
        return value

    def put(self, key: Hashable, value: V, epoch: int | None = None) -> None:
        """Store; with `epoch` (from before loading), only if nothing was invalidated since."""
        with self._lock:
            if epoch is not None and epoch != self._epoch:
                return
            self._items.pop(key, None)
            if len(self._items) >= self._max:
                # dicts keep insertion order, so the first keys are the oldest stored.
                for old in list(self._items)[: self._evict]:
                    del self._items[old]
            self._items[key] = (self._clock() + self._ttl, value)

    def invalidate(self, key: Hashable) -> None:
        with self._lock:
            self._epoch += 1
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._epoch += 1
            self._items.clear()

    def _follow_version(self) -> None:
        """Empty the cache when the store changed since the last lookup. The epoch moves
        too, so a value loaded before the change and stored after it is dropped."""
        if self._version is None:
            return
        current = self._version()
        with self._lock:
            if current != self._seen_version:
                self._seen_version = current
                self._epoch += 1
                self._items.clear()

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, len(self._items))
