"""Routing between the primary backend and its ordered fallbacks.

The rules, for a user:

- create and list: the primary only (a fallback never receives new memories from here);
- get: the primary, then each fallback in order while the answer is "not found" (a
  fallback that fails is skipped; a primary that fails and no fallback that has the memory
  is UNAVAILABLE);
- update and delete: the primary answers; the same change is then replayed on every
  fallback in the background, retried with backoff while the fallback is down, in order per
  fallback (a delete after an update lands after it). Engine status counts the pending ones;
  a fallback that comes back healthy gets its pending changes at once;
- search (Retrieve, Inject, RetrievePreview with a primary other than the local store): the primary's
  own search, then each fallback's in order when the primary fails; the resolution names
  the backend that answered and why the earlier ones did not;
- health: every configured backend is probed periodically, and again for engine status;
- whatever a backend answers to a read (list, search, the newest memories without a
  query) passes one owner filter, `readable`, before it reaches the caller: a remote API
  that ignores the apiKeyId it is sent never hands one tenant another tenant's rows.

With the local store as primary every memory operation goes straight to it, with its vector
index in the same transaction; only update/delete replay and the fallbacks' get/search
involve other backends. With another primary, the vector index is not involved.
"""

from __future__ import annotations

import builtins
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from memsvc.core.memories import NoFollowUp
from memsvc.core.retrieval.ranking import (
    BUDGET_RANGE,
    RECENT_LIMIT,
    Resolution,
    RetrievalRequest,
    RetrievalResult,
    RetrievedItem,
    apply_budget,
    scope_for,
)
from memsvc.core.retrieval.vector_tier import in_scope  # the scope rule vector results pass, applied once
from memsvc.core.settings.backends import LOCAL
from memsvc.core.settings.memory import MemorySettings, Settings
from memsvc.kernel.backend import (
    BackendError,
    BackendHealth,
    BackendSearch,
    InTransaction,
    MemoryBackend,
    PluggableBackend,
    ScoredMemory,
)
from memsvc.kernel.errors import UnavailableError
from memsvc.kernel.models import (
    KeywordHit,
    Memory,
    MemoryFilter,
    MemoryPage,
    MemoryPatch,
    NewMemory,
    SearchScope,
    UpsertResult,
    estimate_tokens,
    utcnow,
)

log = logging.getLogger("memsvc.core.backends")
Factory = Callable[[str, Mapping[str, Any]], PluggableBackend]
TIER_BACKEND = "backend"
STRATEGY_BACKEND = "backend-search"
SEARCH_LIMIT = 100


@dataclass(frozen=True)
class BackendStatus:
    name: str
    kind: str
    role: str  # primary | fallback
    healthy: bool
    latency_ms: float
    error: str
    pending_syncs: int
    checked_at: datetime | None


@dataclass
class _Sync:
    """One change to replay on one fallback."""

    op: str  # update | delete
    memory_id: str
    patch: MemoryPatch | None
    attempts: int = 0
    due: float = 0.0
    error: str = ""


class LocalStore(MemoryBackend, Protocol):
    """The built-in store (SQLite or PostgreSQL): a MemoryBackend with its keyword search."""

    def search_keyword(self, scope: SearchScope, text: str, limit: int) -> builtins.list[KeywordHit]: ...


class LocalPluggable:
    """The built-in store seen as a pluggable backend, so it can be a fallback (get, the
    replayed update/delete, keyword search) like any other. Its name is the settings'
    "local" whichever store it is; its kind (the engine status's type) is the store it
    really is, "sqlite" or "postgres"."""

    def __init__(self, store: LocalStore, kind: str = "sqlite"):
        self.name = LOCAL
        self.kind = kind
        self._store = store

    def initialize(self) -> None: ...

    def shutdown(self) -> None: ...

    def create(self, memory: NewMemory) -> UpsertResult:
        return self._store.create(memory)

    def get(self, memory_id: str) -> Memory | None:
        return self._store.get(memory_id)

    def update(self, memory_id: str, patch: MemoryPatch) -> Memory | None:
        return self._store.update(memory_id, patch)

    def delete(self, memory_id: str) -> bool:
        return self._store.delete(memory_id)

    def list(self, flt: MemoryFilter, limit: int, offset: int) -> MemoryPage:
        return self._store.list(flt, limit, offset)

    def clear(self, flt: MemoryFilter) -> int:
        return self._store.clear(flt)

    def search(self, request: BackendSearch) -> builtins.list[ScoredMemory]:
        return [
            ScoredMemory(h.memory, h.score)
            for h in self._store.search_keyword(request.scope, request.query, request.limit)
        ]

    def health(self) -> BackendHealth:
        started = time.perf_counter()
        report = self._store.health()
        return BackendHealth(
            bool(report.get("ok")), round((time.perf_counter() - started) * 1000, 3), str(report.get("error") or "")
        )


class _Broken:
    """A configured backend that could not be built: every call says why."""

    kind = "unknown"

    def __init__(self, name: str, reason: str):
        self.name = name
        self._reason = reason

    def __getattr__(self, attr: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise BackendError(self._reason)

        return fail

    def health(self) -> BackendHealth:
        return BackendHealth(False, 0.0, self._reason)


def _answered_by(backend: PluggableBackend) -> str:
    """Resolution.backend: the built-in store by the engine it is ("sqlite" or "postgres"),
    any other backend by its settings name."""
    return backend.kind if backend.name == LOCAL else backend.name


@dataclass(frozen=True)
class Routing:
    primary: PluggableBackend
    fallbacks: tuple[PluggableBackend, ...]

    @property
    def local(self) -> bool:
        return self.primary.name == LOCAL

    def chain(self) -> tuple[PluggableBackend, ...]:
        return (self.primary, *self.fallbacks)


def readable(memory: Memory, flt: MemoryFilter) -> bool:
    """Whether a row a backend answered may reach the caller: it belongs to the owner (and
    session) the read asked for, or to one of the owners a confined caller's listing is
    limited to (`memsvc.core.credentials.confined` put them in the filter). A backend is sent
    the filter, but a remote one may ignore it."""
    if flt.api_key_id is not None and memory.api_key_id != flt.api_key_id:
        return False
    if flt.owners is not None and memory.api_key_id not in flt.owners:
        return False
    return flt.session_id is None or memory.session_id == flt.session_id


def readable_page(page: MemoryPage, flt: MemoryFilter) -> MemoryPage:
    """`page` without the rows `readable` refuses; its total and counts lose them too (a
    backend that ignored the filter counted other tenants' rows)."""
    kept: list[Memory] = []
    by_type, tokens = dict(page.by_type), page.tokens_used
    for m in page.data:
        if readable(m, flt):
            kept.append(m)
            continue
        by_type[m.type] = by_type.get(m.type, 0) - 1
        tokens -= estimate_tokens(m.content)
    if len(kept) == len(page.data):
        return page
    total = page.total - (len(page.data) - len(kept))
    return MemoryPage(kept, max(0, total), {k: v for k, v in by_type.items() if v > 0}, max(0, tokens))


def _scope_filter(scope: SearchScope) -> MemoryFilter:
    """The owner filter of a search scope (what a listing of that scope would ask for)."""
    return MemoryFilter(api_key_id=scope.api_key_id, session_id=scope.session_id if scope.session_only else None)


def _unavailable(name: str, exc: Exception) -> UnavailableError:
    return UnavailableError(f"backend {name!r} failed: {exc}", reason="BACKEND_UNAVAILABLE")


class BackendManager:
    """The MemoryBackend the CRUD and engine code talk to: routes each operation as the
    module docstring says. Backends are built from the settings by `factory` and rebuilt
    when their configuration changes."""

    name = "manager"

    def __init__(
        self,
        store: LocalStore,
        settings: Settings,
        factory: Factory,
        *,
        health_interval_s: float = 30.0,
        retry_s: float = 1.0,
        retry_max_s: float = 60.0,
        max_attempts: int = 50,
        local_kind: str = "sqlite",
    ):
        self._store = store
        self._local = LocalPluggable(store, local_kind)
        self._settings = settings
        self._factory = factory
        self._health_interval_s = health_interval_s
        self._retry_s = retry_s
        self._retry_max_s = retry_max_s
        self._max_attempts = max_attempts
        self._lock = threading.Condition()
        self._built: dict[str, tuple[str, PluggableBackend]] = {}
        self._routing_key: tuple[Any, ...] | None = None
        self._routing: Routing | None = None
        self._pending: dict[str, deque[_Sync]] = {}
        self._health: dict[str, tuple[BackendHealth, datetime]] = {}
        self._next_health = 0.0
        self._stopped = False
        self._thread: threading.Thread | None = None

    # ---- configuration ----

    def routing(self, settings: MemorySettings | None = None) -> Routing:
        """The primary and fallbacks of `settings` (a request's, read where it started), by
        default of the current settings."""
        s = settings or self._settings.get()
        key = (s.primary_backend, s.fallback_backends, json.dumps(s.backend_configs, sort_keys=True, default=str))
        with self._lock:
            if key != self._routing_key or self._routing is None:
                self._routing = self._build(s.primary_backend, s.fallback_backends, s.backend_configs)
                self._routing_key = key
                names = {b.name for b in self._routing.fallbacks}
                for gone in [n for n in self._pending if n not in names]:
                    log.warning(
                        "memory.backend.sync.dropped", extra={"backend": gone, "pending": len(self._pending.pop(gone))}
                    )
            return self._routing

    def _build(self, primary: str, fallbacks: Sequence[str], configs: Mapping[str, Any]) -> Routing:
        wanted = [primary, *[f for f in fallbacks if f != primary]]
        built = {name: self._instance(name, configs.get(name)) for name in dict.fromkeys(wanted)}
        for name in [n for n in self._built if n not in built]:
            self._close(self._built.pop(name)[1])
        return Routing(built[primary], tuple(built[f] for f in wanted[1:]))

    def _instance(self, name: str, config: Any) -> PluggableBackend:
        if name == LOCAL:
            return self._local
        fingerprint = json.dumps(config, sort_keys=True, default=str)
        cached = self._built.get(name)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        if cached is not None:
            self._close(cached[1])
        try:
            backend = self._factory(name, config if isinstance(config, Mapping) else {})
        except Exception as exc:  # noqa: BLE001 - a bad stored config must not break every request
            backend = _Broken(name, f"backend {name!r} cannot be built: {exc}")
        self._built[name] = (fingerprint, backend)
        return backend

    @staticmethod
    def _close(backend: PluggableBackend) -> None:
        try:
            backend.shutdown()
        except Exception:  # noqa: BLE001 - closing an old client must not fail a request
            log.warning("memory.backend.shutdown.failed", exc_info=True)

    def primary_is_local(self) -> bool:
        return self.routing().local

    # ---- lifecycle ----

    def initialize(self) -> None:
        """Start the background worker (health checks and replays)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="memsvc-backends", daemon=True)
                self._thread.start()

    def shutdown(self) -> None:
        with self._lock:
            self._stopped = True
            self._lock.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(10)
        for _, backend in list(self._built.values()):
            self._close(backend)
        self._built.clear()

    # ---- routed operations (the MemoryBackend surface) ----

    def create(self, memory: NewMemory) -> UpsertResult:
        r = self.routing()
        if r.local:
            return self._store.create(memory)
        try:
            return r.primary.create(memory)
        except BackendError as exc:
            raise _unavailable(r.primary.name, exc) from None

    def create_many(
        self, memories: Sequence[NewMemory], in_transaction: InTransaction | None = None
    ) -> list[UpsertResult]:
        """The local store: one transaction. Another primary has no transactions: one create each,
        in order, stopping at the first failure (the ones before it stay stored)."""
        if self.routing().local:
            return self._store.create_many(memories, in_transaction)
        return [self.create(m) for m in memories]

    def create_each(
        self, memories: Sequence[NewMemory], in_transaction: InTransaction | None = None
    ) -> list[UpsertResult | Exception]:
        if self.routing().local:
            return self._store.create_each(memories, in_transaction)
        out: list[UpsertResult | Exception] = []
        for memory in memories:
            try:
                out.append(self.create(memory))
            except UnavailableError as exc:
                out.append(exc)
        return out

    def get(self, memory_id: str) -> Memory | None:
        r = self.routing()
        if r.local and not r.fallbacks:
            return self._store.get(memory_id)
        failure: Exception | None = None
        for backend in r.chain():
            try:
                found = backend.get(memory_id)
            except BackendError as exc:
                log.warning("memory.backend.get.failed", extra={"backend": backend.name, "error": str(exc)})
                failure = failure or (_unavailable(backend.name, exc) if backend is r.primary else None)
                continue
            if found is not None:
                return found
        if failure is not None:
            raise failure
        return None

    def update(self, memory_id: str, patch: MemoryPatch) -> Memory | None:
        r = self.routing()
        try:
            updated = r.primary.update(memory_id, patch)
        except BackendError as exc:
            raise _unavailable(r.primary.name, exc) from None
        self._replay(r, _Sync("update", memory_id, patch))
        return updated

    def delete(self, memory_id: str) -> bool:
        r = self.routing()
        try:
            deleted = r.primary.delete(memory_id)
        except BackendError as exc:
            raise _unavailable(r.primary.name, exc) from None
        self._replay(r, _Sync("delete", memory_id, None))
        return deleted

    def clear(self, flt: MemoryFilter) -> int:
        r = self.routing()
        try:
            return r.primary.clear(flt)
        except BackendError as exc:
            raise _unavailable(r.primary.name, exc) from None

    def list(self, flt: MemoryFilter, limit: int, offset: int) -> MemoryPage:
        r = self.routing()
        try:
            return readable_page(r.primary.list(flt, limit, offset), flt)
        except BackendError as exc:
            raise _unavailable(r.primary.name, exc) from None

    def health(self) -> dict[str, object]:
        """The primary's probe, in the shape the local store reports."""
        r = self.routing()
        if r.local:
            return self._store.health()
        h = r.primary.health()
        return {"ok": h.ok, "backend": r.primary.name, "latency_ms": h.latency_ms, "error": h.error}

    # ---- search (retrieval with a primary other than the local store) ----

    def retrieve(self, req: RetrievalRequest, now: datetime | None = None) -> RetrievalResult | None:
        """Retrieval through the backends' own search; None when the local store is the primary (the
        engine's FTS5/vector retrieval runs instead). Never raises for a backend failure:
        the result is empty and the resolution says why."""
        r = self.routing(req.settings)
        if r.local:
            return None
        if req.max_tokens <= 0:
            return RetrievalResult([], 0, Resolution(strategy_used="none", fallback_reason="maxTokens is 0"))
        budget = min(BUDGET_RANGE[1], max(BUDGET_RANGE[0], req.max_tokens))
        scope = scope_for(req, now or utcnow())
        search = BackendSearch(
            req.query.strip(),
            scope,
            limit=min(req.limit or SEARCH_LIMIT, SEARCH_LIMIT),
            max_tokens=budget,
            strategy=req.strategy,
        )
        failures: list[str] = []
        owners = _scope_filter(scope)
        for backend in r.chain():
            try:
                found = self._search_one(backend, search)
            except BackendError as exc:
                failures.append(f"backend {backend.name!r} failed ({exc})")
                continue
            items = [
                RetrievedItem(s.memory, s.score, estimate_tokens(s.memory.content), TIER_BACKEND)
                for s in found
                if in_scope(s.memory, scope) and readable(s.memory, owners)
            ]
            reason = "; ".join(failures + ([f"answered by fallback {backend.name!r}"] if failures else []))
            return RetrievalResult(
                apply_budget(items, budget, req.limit),
                budget,
                Resolution(strategy_used=STRATEGY_BACKEND, fallback_reason=reason, backend=_answered_by(backend)),
            )
        return RetrievalResult(
            [],
            budget,
            Resolution(
                strategy_used="none",
                backend=_answered_by(r.primary),
                fallback_reason="; ".join(failures + ["no backend answered"]),
            ),
        )

    @staticmethod
    def _search_one(backend: PluggableBackend, search: BackendSearch) -> builtins.list[ScoredMemory]:
        """The backend's search for a query; its newest memories in scope without one."""
        if search.query:
            return backend.search(search)
        page = backend.list(_scope_filter(search.scope), min(search.limit, RECENT_LIMIT), 0)
        return [ScoredMemory(m) for m in page.data]

    # ---- replay of updates and deletes on the fallbacks ----

    def _replay(self, r: Routing, change: _Sync) -> None:
        if not r.fallbacks:
            return
        with self._lock:
            now = time.monotonic()
            for backend in r.fallbacks:
                self._pending.setdefault(backend.name, deque()).append(
                    _Sync(change.op, change.memory_id, change.patch, due=now)
                )
            self._lock.notify_all()
        self.initialize()

    def pending(self) -> dict[str, int]:
        with self._lock:
            return {name: len(queue) for name, queue in self._pending.items() if queue}

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopped:
                    return
                now = time.monotonic()
                due = [n for n, q in self._pending.items() if q and q[0].due <= now]
                health_due = now >= self._next_health
                if not due and not health_due:
                    heads = [q[0].due for q in self._pending.values() if q]
                    self._lock.wait(max(0.0, min([self._next_health, *heads]) - now))
                    continue
                if health_due:
                    self._next_health = now + self._health_interval_s
            try:
                if health_due:
                    self.check_all()
                for name in due:
                    self._attempt(name)
            except Exception:  # noqa: BLE001 - the worker must outlive any one failure
                log.exception("memory.backend.worker.failed")

    def _attempt(self, name: str) -> None:
        """The oldest pending change of one fallback (later ones wait: order matters)."""
        backend = next((b for b in self.routing().fallbacks if b.name == name), None)
        with self._lock:
            queue = self._pending.get(name)
            change = queue[0] if queue else None
        if backend is None or change is None:
            return
        try:
            if change.op == "delete":
                backend.delete(change.memory_id)
            elif change.patch is not None:
                backend.update(change.memory_id, change.patch)
        except Exception as exc:
            self._retry_later(name, change, exc)
            return
        with self._lock:
            if queue and queue[0] is change:
                queue.popleft()
            self._lock.notify_all()

    def _retry_later(self, name: str, change: _Sync, exc: Exception) -> None:
        with self._lock:
            change.attempts += 1
            change.error = str(exc)
            queue = self._pending.get(name)
            if change.attempts >= self._max_attempts and queue and queue[0] is change:
                queue.popleft()
                log.warning(
                    "memory.backend.sync.given_up",
                    extra={"backend": name, "op": change.op, "attempts": change.attempts, "error": change.error},
                )
                return
            change.due = time.monotonic() + min(self._retry_max_s, self._retry_s * 2 ** (change.attempts - 1))

    # ---- health ----

    def _probe(self, backend: PluggableBackend) -> BackendHealth:
        try:
            health = backend.health()
        except Exception as exc:
            health = BackendHealth(False, 0.0, f"{type(exc).__name__}: {exc}")
        with self._lock:
            self._health[backend.name] = (health, utcnow())
            queue = self._pending.get(backend.name)
            if health.ok and queue:
                queue[0].due = min(queue[0].due, time.monotonic())  # back: replay now
                self._lock.notify_all()
        return health

    def check_all(self) -> builtins.list[BackendStatus]:
        """Probe every configured backend now; the statuses engine status shows."""
        r = self.routing()
        out = []
        for role, backend in [("primary", r.primary), *[("fallback", b) for b in r.fallbacks]]:
            health = self._probe(backend)
            with self._lock:
                checked = self._health[backend.name][1]
                pending = len(self._pending.get(backend.name) or ())
            out.append(
                BackendStatus(
                    backend.name, _kind(backend), role, health.ok, health.latency_ms, health.error, pending, checked
                )
            )
        return out


def _kind(backend: PluggableBackend) -> str:
    return getattr(backend, "kind", "") or "unknown"


class RoutedEvents:
    """The vector index follows memory writes only while the local store is the primary (its rows
    live in the transaction that stores the memories)."""

    def __init__(self, events: Any, manager: BackendManager):
        self._events = events
        self._manager = manager

    def creating(self, drafts: Sequence[NewMemory]) -> Any:
        return self._events.creating(drafts) if self._manager.primary_is_local() else NoFollowUp()

    def written(self, ids: Sequence[str]) -> None:
        if self._manager.primary_is_local():
            self._events.written(ids)

    def rescoped(self, memories: Sequence[Memory]) -> None:
        if self._manager.primary_is_local():
            self._events.rescoped(memories)
