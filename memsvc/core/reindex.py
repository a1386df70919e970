"""Reindex: re-embed memories marked `needs_reindex` (or, with target
qdrant, copy every memory into Qdrant), as a job with streamed progress.

One job at a time per process; the job runs on its own thread, so a client that disconnects
cancels nothing, and a later caller may attach to its progress. Preconditions (no embedding
source, no vector tier, Qdrant disabled) are checked before the job starts, so a refusal is
a real error status and never a stream that reports zero.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from memsvc.core.errors import ConflictError, PreconditionError, ValidationError
from memsvc.core.models import Memory
from memsvc.core.settings import Settings
from memsvc.core.vector_tier import VectorTier
from memsvc.embedding.errors import EmbeddingError
from memsvc.vectors.index import VectorError, VectorRow

log = logging.getLogger("memsvc.core.reindex")

#: Rows in the first batch; each later batch is sized from the rate seen so that it takes
#: about BATCH_SECONDS, growing at most twofold a step: large for a fast source (fewer
#: transactions and reads: ~20% less CPU per row at 1,024 than at 256 with the static
#: model), small for a slow one (progress messages keep coming).
BATCH = 128
MIN_BATCH = 32
MAX_BATCH = 1024  # bounds how long one batch holds the writer lock (tens of ms)
BATCH_SECONDS = 1.0
TARGETS = ("sqlite-vec", "qdrant")
TERMINAL = ("done", "failed", "cancelled")


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


class Reindexer:
    def __init__(self, vectors: VectorTier, settings: Settings, all_memories: Callable[[int, int], list[Memory]],
                 mark_all: Callable[[], int], batch_size: int = BATCH):
        self._vectors = vectors
        self._settings = settings
        self._all_memories = all_memories
        self._mark_all = mark_all
        self._batch = batch_size
        self._lock = threading.Lock()
        self._job: ReindexJob | None = None

    def current(self) -> ReindexJob | None:
        return self._job

    def start(self, force: bool = False, limit: int = 0, target: str = "", attach: bool = False) -> ReindexJob:
        """Start a job, or attach to the running one when asked; ConflictError when one is
        running and the caller did not ask to attach."""
        target = target or "sqlite-vec"
        if target not in TARGETS:
            raise ValidationError.single("target", f"must be one of {', '.join(TARGETS)}")
        if limit < 0:
            raise ValidationError.single("limit", "must be at least 0 (0 = every pending memory)")
        with self._lock:
            running = self._job if self._job is not None and not self._job.finished else None
            if running is not None:
                if attach:
                    return running
                raise ConflictError("a reindex is already running; retry later or attach to it",
                                    reason="REINDEX_RUNNING")
            source = self._check_preconditions(target)
            if target == "sqlite-vec":
                self._align_signature()
            if force and target == "sqlite-vec":
                self._mark_all()
            pending = self._pending_total(target, limit)
            job = ReindexJob(target, Progress(started=True, pending=pending))
            self._job = job
        threading.Thread(target=self._run, args=(job, source, limit), name="memsvc-reindex", daemon=True).start()
        return job

    def _check_preconditions(self, target: str) -> Any:
        settings = self._settings.get()
        resolved = self._vectors.embeddings.resolve(settings)
        if resolved.source is None:
            raise PreconditionError(f"no embedding source: {resolved.reason}", reason="NO_EMBEDDING_SOURCE")
        if target == "sqlite-vec" and not self._vectors.sqlite.available:
            raise PreconditionError("no vector tier: the sqlite-vec extension is not loaded", reason="NO_VECTOR_TIER")
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
            self._vectors.sqlite.ensure(resolved.signature, resolved.dimensions)
            return
        stored = self._vectors.sqlite.state().signature
        if stored and not stored.startswith(f"{resolved.name}:{resolved.model}:"):
            self._mark_all()

    def _pending_total(self, target: str, limit: int) -> int:
        total = self._vectors.sqlite.pending_count() if target == "sqlite-vec" else self._count_all()
        return min(total, limit) if limit else total

    def _count_all(self) -> int:
        count, offset = 0, 0
        while batch := self._all_memories(offset, 10_000):
            count += len(batch)
            offset += len(batch)
        return count

    def _run(self, job: ReindexJob, source: Any, limit: int) -> None:
        started = time.monotonic()
        first = job.latest()
        progress = replace(first, started=False)
        size = self._batch
        try:
            mark = time.monotonic()
            for batch in self._batches(job.target, limit, lambda: size):
                done, failed = self._index(job.target, source, batch)
                progress = _advance(progress, done, failed, started, first.pending)
                job.publish(progress)
                now = time.monotonic()
                size = _next_size(size, len(batch), now - mark)
                mark = now
            job.publish(replace(progress, state="done", pending=max(0, first.pending - progress.processed)))
        except Exception as exc:  # noqa: BLE001 - reported in the stream's last message
            log.error("reindex.failed", exc_info=True)
            job.publish(replace(progress, state="failed", error=f"{type(exc).__name__}: {str(exc)[:300]}"))

    def _batches(self, target: str, limit: int, batch_size: Callable[[], int]):
        """Pending rows newest first, paging down past rows that failed (sqlite-vec); every
        memory in memory_id order (qdrant backfill). `batch_size()` is asked before each."""
        remaining = limit or None
        before: int | None = None
        offset = 0
        while remaining is None or remaining > 0:
            size = batch_size() if remaining is None else min(batch_size(), remaining)
            if target == "sqlite-vec":
                batch = self._vectors.sqlite.pending(None, size, before_memory_id=before)
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
            index = self._vectors.sqlite if target == "sqlite-vec" else self._vectors.qdrant.index()
            index.ensure(resolved.signature, resolved.dimensions)
            index.upsert(rows)
        except (EmbeddingError, VectorError) as exc:
            log.warning("reindex.batch_failed", extra={"count": len(batch), "reason": str(exc)[:200]})
            if target == "sqlite-vec":
                self._vectors.sqlite.mark_failed(batch)
            return 0, len(batch)
        return len(batch), 0


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
    return replace(progress, processed=processed, errors=errors, pending=left, rate_per_second=round(rate, 2),
                   eta_seconds=round(left / rate, 2) if rate > 0 else 0.0)
