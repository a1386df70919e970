"""Reindex: re-embed memories marked `needs_reindex` (or, with target
qdrant, copy every memory into Qdrant), as a job with streamed progress.

One job at a time per database, whichever of the server processes sharing it starts it: the
job holds the "reindex" lease (memsvc.core.leases) while it runs and publishes each progress
message in the lease row. A second Reindex, through this process or another, is refused, or
with `attach` follows the running job (in this process its full stream; in another, the
published messages, polled from the row). A killed holder's lease expires, and the next
Reindex is accepted. The job runs on its own thread, so a client that disconnects cancels
nothing. Preconditions (no embedding source, no vector tier, Qdrant disabled) are checked
before the job starts, so a refusal is a real error status and never a stream that reports
zero.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

from memsvc.core.leases import Lease, LeaseRecord, LeaseStore, LeaseTiming
from memsvc.core.retrieval.vector_tier import VectorTier
from memsvc.core.settings.memory import Settings
from memsvc.kernel.embedding_errors import EmbeddingError
from memsvc.kernel.errors import ConflictError, PreconditionError, ValidationError
from memsvc.kernel.models import Memory
from memsvc.kernel.vector_index import VectorError, VectorRow, VectorUnavailable

log = logging.getLogger("memsvc.core.reindex")

#: Rows in the first batch; each later batch is sized from the rate seen so that it takes
#: about BATCH_SECONDS, growing at most twofold a step: large for a fast source (fewer
#: transactions and reads: ~20% less CPU per row at 1,024 than at 256 with the static
#: model), small for a slow one (progress messages keep coming).
BATCH = 128
MIN_BATCH = 32
MAX_BATCH = 1024  # bounds how long one batch holds the writer lock (tens of ms)
BATCH_SECONDS = 1.0
#: "local": the store's own vector index (sqlite-vec on SQLite, pgvector on PostgreSQL).
LOCAL = "local"
TARGETS = (LOCAL, "qdrant")
#: Earlier names of LOCAL that clients (and the lease rows of older processes) may still send.
TARGET_ALIASES = {"sqlite-vec": LOCAL, "pgvector": LOCAL}
TERMINAL = ("done", "failed", "cancelled")
LEASE = "reindex"
HOLDER_GONE = "the process running this reindex stopped before it finished (its lease expired)"
LEASE_LOST = "another process took over the reindex lease (this one could not renew it in time)"


@dataclass(frozen=True)
class Progress:
    started: bool = False
    pending: int = 0
    processed: int = 0
    errors: int = 0
    rate_per_second: float = 0.0
    eta_seconds: float = 0.0
    state: str = "running"
    error: str = ""


@dataclass(frozen=True)
class ReindexStatus:
    """The database's reindex as engine status reports it, from any process: `running`
    while a live holder has not finished; `progress` its latest message (after the end, the
    last run's final one; None before any run)."""

    running: bool = False
    target: str = ""
    progress: Progress | None = None
    holder: str = ""


def encode_progress(target: str, progress: Progress) -> str:
    """A job's message as the lease row carries it to the other processes."""
    return json.dumps({"target": target, "progress": asdict(progress)})


def decode_progress(payload: str | None) -> tuple[str, Progress] | None:
    if not payload:
        return None
    data = json.loads(payload)
    return TARGET_ALIASES.get(data["target"], data["target"]), Progress(**data["progress"])


class _LeaseLost(Exception):
    pass


class ReindexJob:
    """The progress of one run: a growing list of messages readers wait on."""

    def __init__(self, target: str, first: Progress):
        self.target = target
        self._events: list[Progress] = [first]
        self._cond = threading.Condition()

    def publish(self, progress: Progress) -> None:
        with self._cond:
            self._events.append(progress)
            self._cond.notify_all()

    def latest(self) -> Progress:
        with self._cond:
            return self._events[-1]

    @property
    def finished(self) -> bool:
        return self.latest().state in TERMINAL

    def wait_events(self, cursor: int, timeout_s: float = 1.0) -> list[Progress]:
        """Messages after `cursor` (blocking up to timeout_s for the next one)."""
        with self._cond:
            if len(self._events) <= cursor and self._events[-1].state not in TERMINAL:
                self._cond.wait(timeout_s)
            return list(self._events[cursor:])


class FollowedJob:
    """Another process's job, read from its lease row: each published message once, then a
    `failed` one if the holder stops publishing for good (its lease expired) or the row
    passes to a new job before this one's final message was seen."""

    def __init__(self, store: LeaseStore, record: LeaseRecord, poll_s: float):
        self._store = store
        self._holder = record.holder
        self._seq = -1
        self._poll_s = poll_s
        self.target = ""
        self._events: list[Progress] = []
        self._take(record)

    def latest(self) -> Progress:
        return self._events[-1] if self._events else Progress(started=True)

    @property
    def finished(self) -> bool:
        return bool(self._events) and self._events[-1].state in TERMINAL

    def wait_events(self, cursor: int, timeout_s: float = 1.0) -> list[Progress]:
        """Messages after `cursor`, polling the row up to timeout_s for the next one."""
        deadline = time.monotonic() + timeout_s
        while len(self._events) <= cursor and not self.finished and time.monotonic() < deadline:
            time.sleep(self._poll_s)
            self._take(self._store.read(LEASE))
        return list(self._events[cursor:])

    def _take(self, record: LeaseRecord | None) -> None:
        if self.finished:
            return
        if record is None or record.holder != self._holder:
            self._events.append(
                replace(
                    self.latest(),
                    started=False,
                    state="failed",
                    error="the followed reindex ended; a new one has started since",
                )
            )
            return
        decoded = decode_progress(record.payload) if record.seq != self._seq else None
        self._seq = record.seq
        if decoded is not None:
            self.target, progress = decoded
            self._events.append(progress)
        if not record.live and not self.finished:
            self._events.append(replace(self.latest(), started=False, state="failed", error=HOLDER_GONE))


class Reindexer:
    def __init__(
        self,
        vectors: VectorTier,
        settings: Settings,
        all_memories: Callable[[int, int], list[Memory]],
        mark_all: Callable[[], int],
        leases: LeaseStore,
        timing: LeaseTiming = LeaseTiming(),
        batch_size: int = BATCH,
    ):
        self._vectors = vectors
        self._settings = settings
        self._all_memories = all_memories
        self._mark_all = mark_all
        self._leases = leases
        self._timing = timing
        self._batch = batch_size
        self._lock = threading.Lock()
        self._job: ReindexJob | None = None

    def current(self) -> ReindexJob | None:
        """This process's latest job (None when it never ran one)."""
        return self._job

    def status(self) -> ReindexStatus:
        """The database's reindex, as its lease row says (whichever process runs it)."""
        record = self._leases.read(LEASE)
        decoded = decode_progress(record.payload) if record is not None else None
        if record is None or decoded is None:
            running = record is not None and record.live
            return ReindexStatus(running=running, holder=record.holder if record is not None and running else "")
        target, progress = decoded
        if progress.state not in TERMINAL and not record.live:
            progress = replace(progress, state="failed", error=HOLDER_GONE)
        running = progress.state not in TERMINAL
        return ReindexStatus(running, target, progress, record.holder if running else "")

    def start(
        self, force: bool = False, limit: int = 0, target: str = "", attach: bool = False
    ) -> ReindexJob | FollowedJob:
        """Start a job, or attach to the running one (of this process or another) when
        asked; ConflictError when one is running and the caller did not ask to attach."""
        target = TARGET_ALIASES.get(target, target) or LOCAL
        if target not in TARGETS:
            raise ValidationError.single("target", f"must be one of {', '.join(TARGETS)}")
        if limit < 0:
            raise ValidationError.single("limit", "must be at least 0 (0 = every pending memory)")
        with self._lock:
            running = self._running(attach)
            if running is not None:
                return running
            source = self._check_preconditions(target)
            lease = Lease.try_acquire(self._leases, LEASE, self._timing)
            if lease is None:  # another process took it since `_running` looked
                return self._refuse_or_follow(self._leases.read(LEASE), attach)
            try:
                job = self._prepare(target, force, limit, lease)
            except BaseException:
                lease.release()
                raise
            self._job = job
        threading.Thread(target=self._run, args=(job, source, limit, lease), name="memsvc-reindex", daemon=True).start()
        return job

    def _running(self, attach: bool) -> ReindexJob | FollowedJob | None:
        """The job already running (this process's, else another's), or None when none is;
        ConflictError when one is and the caller did not ask to attach."""
        if self._job is not None and not self._job.finished:
            if attach:
                return self._job
            raise _already_running()
        record = self._leases.read(LEASE)
        if record is not None and record.live:
            return self._refuse_or_follow(record, attach)
        return None

    def _refuse_or_follow(self, record: LeaseRecord | None, attach: bool) -> FollowedJob:
        if not attach or record is None:
            raise _already_running()
        return FollowedJob(self._leases, record, self._timing.poll_s)

    def _prepare(self, target: str, force: bool, limit: int, lease: Lease) -> ReindexJob:
        """Under the lease: align the table with the source, mark (force), count, publish."""
        if target == LOCAL:
            self._align_signature()
        if force and target == LOCAL:
            self._mark_all()
        job = ReindexJob(target, Progress(started=True, pending=self._pending_total(target, limit)))
        lease.publish(encode_progress(target, job.latest()))
        return job

    def _check_preconditions(self, target: str) -> Any:
        settings = self._settings.get()
        resolved = self._vectors.embeddings.resolve(settings)
        if resolved.source is None:
            raise PreconditionError(f"no embedding source: {resolved.reason}", reason="NO_EMBEDDING_SOURCE")
        if target == LOCAL and not self._vectors.local.available:
            raise PreconditionError(
                f"no vector tier: the store's vector index ({self._vectors.local.name}) is not available",
                reason="NO_VECTOR_TIER",
            )
        if target == "qdrant" and not self._vectors.qdrant.settings().enabled:
            raise PreconditionError("Qdrant is not enabled", reason="QDRANT_DISABLED")
        return resolved.source

    def _align_signature(self) -> None:
        """A changed source must count its rows as pending before the first message, or the
        old model's vectors would look current. With a known dimension the table is reset
        now; a remote source learns its dimension from the job's first batch (no blocking
        call here), so a different source:model just marks every row."""
        resolved = self._vectors.embeddings.resolve(self._settings.get())
        if resolved.signature is not None:
            self._vectors.local.ensure(resolved.signature, resolved.dimensions)
            return
        stored = self._vectors.local.state().signature
        if stored and not stored.startswith(f"{resolved.name}:{resolved.model}:"):
            self._mark_all()

    def _pending_total(self, target: str, limit: int) -> int:
        total = self._vectors.local.pending_count() if target == LOCAL else self._count_all()
        return min(total, limit) if limit else total

    def _count_all(self) -> int:
        count, offset = 0, 0
        while batch := self._all_memories(offset, 10_000):
            count += len(batch)
            offset += len(batch)
        return count

    def _run(self, job: ReindexJob, source: Any, limit: int, lease: Lease) -> None:
        started = time.monotonic()
        first = job.latest()
        progress = replace(first, started=False)
        size = self._batch
        try:
            mark = time.monotonic()
            for batch in self._batches(job.target, limit, lambda: size):  # noqa: B023 - read late on purpose: the size adapts
                done, failed = self._index(job.target, source, batch)
                progress = _advance(progress, done, failed, started, first.pending)
                job.publish(progress)
                if not lease.publish(encode_progress(job.target, progress)):
                    raise _LeaseLost(LEASE_LOST)
                now = time.monotonic()
                size = _next_size(size, len(batch), now - mark)
                mark = now
            progress = replace(progress, state="done", pending=max(0, first.pending - progress.processed))
        except _LeaseLost as exc:
            log.error("reindex.lease_lost")
            progress = replace(progress, state="failed", error=str(exc))
        except Exception as exc:  # noqa: BLE001 - reported in the stream's last message
            log.exception("reindex.failed")
            progress = replace(progress, state="failed", error=f"{type(exc).__name__}: {str(exc)[:300]}")
        self._finish(job, lease, progress)

    def _finish(self, job: ReindexJob, lease: Lease, last: Progress) -> None:
        """The final message: into the lease row as it is released (so a new job may start
        at once), then into this process's stream."""
        try:
            lease.release(encode_progress(job.target, last))
        except Exception:  # noqa: BLE001 - the lease then expires on its own
            log.exception("reindex.release_failed")
        job.publish(last)

    def _batches(self, target: str, limit: int, batch_size: Callable[[], int]) -> Iterator[list[Memory]]:
        """Pending rows newest first, paging down past rows that failed (sqlite-vec); every
        memory in memory_id order (qdrant backfill). `batch_size()` is asked before each."""
        remaining = limit or None
        before: int | None = None
        offset = 0
        while remaining is None or remaining > 0:
            size = batch_size() if remaining is None else min(batch_size(), remaining)
            if target == LOCAL:
                batch = self._vectors.local.pending(None, size, before_memory_id=before)
                if batch:
                    before = min(m.memory_id for m in batch)
            else:
                batch = self._all_memories(offset, size)
                offset += len(batch)
            if not batch:
                return
            if remaining is not None:
                remaining -= len(batch)
            yield batch

    def _index(self, target: str, source: Any, batch: list[Memory]) -> tuple[int, int]:
        """Embed and store one batch; (processed, errors). A failed batch marks its rows."""
        resolved = self._vectors.embeddings.resolve(self._settings.get())
        try:
            vectors = self._vectors.embeddings.embed_with(source, [m.content for m in batch])
            rows = [VectorRow.from_memory(m, v) for m, v in zip(batch, vectors)]
            index = self._vectors.local if target == LOCAL else self._vectors.qdrant.index()
            if index is None:  # Qdrant was turned off while the reindex ran
                raise VectorUnavailable("qdrant is not enabled")
            index.ensure(resolved.signature, resolved.dimensions)
            index.upsert(rows)
        except (EmbeddingError, VectorError) as exc:
            log.warning("reindex.batch_failed", extra={"count": len(batch), "reason": str(exc)[:200]})
            if target == LOCAL:
                self._vectors.local.mark_failed(batch)
            return 0, len(batch)
        return len(batch), 0


def _already_running() -> ConflictError:
    return ConflictError("a reindex is already running; retry later or attach to it", reason="REINDEX_RUNNING")


def _next_size(size: int, rows: int, seconds: float) -> int:
    """The next batch size: what the rate just seen does in BATCH_SECONDS, at most twice
    the current size (one noisy measurement cannot jump to the maximum)."""
    rate = rows / max(seconds, 1e-3)
    return max(MIN_BATCH, min(MAX_BATCH, 2 * size, int(rate * BATCH_SECONDS)))


def _advance(progress: Progress, done: int, failed: int, started: float, total: int) -> Progress:
    processed = progress.processed + done
    errors = progress.errors + failed
    elapsed = max(time.monotonic() - started, 1e-6)
    rate = (processed + errors) / elapsed
    left = max(0, total - processed - errors)
    return replace(
        progress,
        processed=processed,
        errors=errors,
        pending=left,
        rate_per_second=round(rate, 2),
        eta_seconds=round(left / rate, 2) if rate > 0 else 0.0,
    )
