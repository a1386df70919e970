"""Prometheus metrics: per-RPC latency and status, retrieval tiers and fallbacks, embedding
cache, reindex progress, database size, free space and full-disk refusals.

One registry per process (not the library's global one), so in-process test servers do not
share counters. Gauges that mirror state elsewhere (cache counters, DB size, reindex) are
read at scrape time by a collector instead of being pushed on every change.

With several server processes, each worker's counters and histograms live in
prometheus_client's multiprocess files (PROMETHEUS_MULTIPROC_DIR, set by the parent for its
workers) and the parent's /metrics (`ProcessesMetrics`) sums them.

Those files are memory-mapped, and a store through a mapping into a page the filesystem
cannot allocate kills the process with SIGBUS (no error a write could return). So they are
never on the data disk, which fills: the parent creates a private folder per run on the RAM
filesystem (/dev/shm; the temporary folder where there is none) and removes it at exit, and
each worker allocates its files whole before prometheus_client maps them
(`preallocate_worker_files`), so no store of the bounded set of series ever lands on a hole.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from memsvc.kernel.errors import storage_full

# Retrieval runs in a few milliseconds; the buckets resolve that range finely.
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


@dataclass
class StateSources:
    """Callables the collector reads at scrape time; any may be None."""

    #: The SQLite file. None with PostgreSQL (its files are the database server's, and the
    #: data dir's free space says nothing about them): no size or free-space gauges then.
    db_path: str | None = None
    embedding_cache: Callable[[], Mapping[str, int]] | None = None
    reindex: Callable[[], Mapping[str, float]] | None = None
    #: The working sets' owners, bytes, budget and counters (memsvc.working_set.WorkingSets.status).
    working_sets: Callable[[], Mapping[str, int]] | None = None


class _StateCollector(Collector):
    def __init__(self, sources: StateSources):
        self._sources = sources

    def collect(self) -> Iterable[GaugeMetricFamily]:
        if self._sources.db_path:
            size = GaugeMetricFamily("memsvc_db_size_bytes", "SQLite database size (main file + WAL)")
            size.add_metric([], _file_size(self._sources.db_path) + _file_size(self._sources.db_path + "-wal"))
            yield size
            free = GaugeMetricFamily("memsvc_data_free_bytes", "Bytes left on the data directory's filesystem")
            free.add_metric([], _free_bytes(os.path.dirname(self._sources.db_path) or "."))
            yield free
        if self._sources.embedding_cache:
            stats = self._sources.embedding_cache()
            cache = GaugeMetricFamily("memsvc_embedding_cache", "Embedding cache counters", labels=["kind"])
            for kind in ("hits", "misses", "size"):
                cache.add_metric([kind], float(stats.get(kind, 0)))
            yield cache
        if self._sources.working_sets:
            held = GaugeMetricFamily(
                "memsvc_working_sets",
                "Per-owner working sets in memory: owners, bytes, "
                "budget_bytes, and counters of builds, updates, store_searches, evictions, past_builds, past_hits",
                labels=["field"],
            )
            for name, value in self._sources.working_sets().items():
                held.add_metric([name], float(value))
            yield held
        if self._sources.reindex:
            progress = GaugeMetricFamily("memsvc_reindex", "Progress of the current or last reindex", labels=["field"])
            for name, amount in self._sources.reindex().items():
                progress.add_metric([name], float(amount))
            yield progress


def _free_bytes(directory: str) -> float:
    try:
        return float(shutil.disk_usage(directory).free)
    except OSError:
        return 0.0


def _file_size(path: str) -> float:
    try:
        return float(os.path.getsize(path))
    except OSError:
        return 0.0


class _Endpoint:
    """/metrics over HTTP for `registry`."""

    registry: CollectorRegistry
    _server = None

    def serve(self, host: str, port: int) -> int:
        """Expose /metrics over HTTP; returns the bound port (port 0 picks one)."""
        self._server, _ = start_http_server(port, addr=host, registry=self.registry)
        return self._server.server_port

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _WorkerFiles(multiprocess.MultiProcessCollector):
    """The workers' multiprocess files, summed, leaving out a file not sized yet.
    prometheus_client creates a worker's file empty and sizes it just after: a scrape in
    between failed whole (`struct.error`), and a worker killed in between left an empty
    file that failed every later scrape (prometheus/client_python#1199)."""

    def collect(self):
        files = []
        for path in glob.glob(os.path.join(self._path, "*.db")):
            try:
                if os.path.getsize(path) >= _HEADER_BYTES:
                    files.append(path)
            except OSError:  # removed since the glob: a dead worker's live gauges
                continue
        return self.merge(files, accumulate=True)


# A multiprocess file's header: the used size (4 bytes) and padding (4 bytes).
_HEADER_BYTES = 8


class ProcessesMetrics(_Endpoint):
    """The parent's /metrics with several server processes: the workers' counters and
    histograms summed from `directory` (emptied here: files of an earlier run would be
    counted again), plus the state gauges (database size and free space) read once."""

    def __init__(self, directory: Path, sources: StateSources, *, owned: bool = False):
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):
            stale.unlink()
        self.directory = directory
        self._owned = owned
        self.registry = CollectorRegistry()
        _WorkerFiles(self.registry, path=str(directory))
        self.registry.register(_StateCollector(sources))

    @classmethod
    def private(cls, sources: StateSources) -> ProcessesMetrics:
        """Over a folder of this run's own off the data disk (`runtime_directory`), removed
        by `close`."""
        return cls(runtime_directory(), sources, owned=True)

    def process_exited(self, pid: int) -> None:
        """Forget the live gauges of a worker that exited (its counters stay in the sums)."""
        multiprocess.mark_process_dead(pid, str(self.directory))

    def close(self) -> None:
        super().close()
        if self._owned:
            shutil.rmtree(self.directory, ignore_errors=True)


# How a worker's state gauges combine in the parent's /metrics: the embedding caches of the
# live workers add up; the reindex runs in one process at a time, so its latest values win.
#: How a worker-published gauge combines across processes (prometheus_client's modes).
_Mode = Literal["livesum", "livemostrecent"]
ACROSS_PROCESSES: dict[str, tuple[str, _Mode]] = {
    "memsvc_embedding_cache": ("kind", "livesum"),
    "memsvc_reindex": ("field", "livemostrecent"),
    "memsvc_working_sets": ("field", "livesum"),
}
PUBLISH_S = 1.0


RUNTIME_BASES = ("/dev/shm",)  # RAM: never the data disk; tempfile.gettempdir() where absent
_RUNTIME_PREFIX = "memsvc-metrics-"
_RUNTIME_NAME = re.compile(re.escape(_RUNTIME_PREFIX) + r"(\d+)-")


def runtime_directory() -> Path:
    """A new private folder (mode 0700) for this run's multiprocess files, on the first of
    RUNTIME_BASES this process may write, else in the temporary folder. Its name carries
    this process's pid, so folders left by a parent that was killed (no cleanup ran) are
    removed here once their parent is gone."""
    base = next(
        (b for b in RUNTIME_BASES if os.path.isdir(b) and os.access(b, os.W_OK | os.X_OK)), tempfile.gettempdir()
    )
    for leftover in glob.glob(os.path.join(base, _RUNTIME_PREFIX + "*")):
        match = _RUNTIME_NAME.match(os.path.basename(leftover))
        if match and not _alive(int(match.group(1))):
            shutil.rmtree(leftover, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{_RUNTIME_PREFIX}{os.getpid()}-", dir=base))


def _alive(pid: int) -> bool:
    """Whether `pid` exists, by signal 0 (unlike memsvc.process_tree, no /proc needed: this
    also runs where there is no /dev/shm)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


# The bytes each of a worker's multiprocess files is given before it is mapped, by file
# prefix (prometheus_client names them <prefix>_<pid>.db). They hold every series a worker
# can write: each RPC method with each status code, each latency bucket of each method
# (about 110 KB and 130 KB with today's 39 methods; tests/service/test_disk_full.py writes
# them all on a full disk), and the few state gauges.
WORKER_FILE_BYTES = {
    "counter": 512 * 1024,
    "histogram": 512 * 1024,
    **{f"gauge_{mode}": 64 * 1024 for _, mode in ACROSS_PROCESSES.values()},
}


class MetricsFilesError(RuntimeError):
    """A worker's multiprocess files could not be allocated (their filesystem is full)."""


def preallocate_worker_files(directory: Path, pid: int | None = None) -> None:
    """Allocate this worker's multiprocess files whole (posix_fallocate) before
    prometheus_client creates them: it would size them with truncate, which leaves holes,
    and a store into a hole on a full filesystem is SIGBUS. A filesystem too full for them
    is a clear error at the worker's start instead."""
    pid = os.getpid() if pid is None else pid
    for prefix, size in WORKER_FILE_BYTES.items():
        path = directory / f"{prefix}_{pid}.db"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as exc:
            path.unlink(missing_ok=True)
            reason = "no space left" if exc.errno == errno.ENOSPC else exc.strerror
            raise MetricsFilesError(f"cannot allocate the metrics file {path} ({size} bytes): {reason}") from None
        finally:
            os.close(fd)


class _StatePublisher:
    """A worker's state gauges, which its own collector computes at scrape time, copied into
    multiprocess gauges every PUBLISH_S (the parent's scrape cannot call into a worker).
    A value is written only when it changed, so "most recent" means the latest change."""

    def __init__(self, collector: _StateCollector):
        self._collector = collector
        self._gauges = {
            name: Gauge(name, "", [label], multiprocess_mode=mode, registry=None)
            for name, (label, mode) in ACROSS_PROCESSES.items()
        }
        self._written: dict[tuple[str, str], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memsvc-metrics-publish", daemon=True)
        self._thread.start()

    def publish(self) -> None:
        for family in self._collector.collect():
            gauge = self._gauges.get(family.name)
            if gauge is None:
                continue
            for sample in family.samples:
                label = next(iter(sample.labels.values()))
                if self._written.get((family.name, label)) != sample.value:
                    gauge.labels(label).set(sample.value)
                    self._written[(family.name, label)] = sample.value

    def _run(self) -> None:
        while not self._stop.wait(PUBLISH_S):
            self.publish()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(PUBLISH_S * 5)
        self.publish()  # the last values, for the scrape after this worker stopped


class Metrics(_Endpoint):
    def __init__(self, sources: StateSources | None = None):
        self.registry = CollectorRegistry()
        self._state = _StateCollector(sources or StateSources())
        self._publisher: _StatePublisher | None = None
        self.rpc_latency = Histogram(
            "memsvc_rpc_duration_seconds", "RPC latency", ["method"], buckets=LATENCY_BUCKETS, registry=self.registry
        )
        self.rpc_total = Counter("memsvc_rpc", "RPCs by final status", ["method", "code"], registry=self.registry)
        self.retrieval_tier = Counter(
            "memsvc_retrieval", "Retrievals by the tier that answered", ["strategy_used"], registry=self.registry
        )
        self.retrieval_fallback = Counter(
            "memsvc_retrieval_fallback", "Retrievals that fell back from the requested tier", registry=self.registry
        )
        self.storage_full = Counter(
            "memsvc_storage_full",
            "Requests refused because the data directory's "
            "filesystem had no space left (RESOURCE_EXHAUSTED, reason STORAGE_FULL)",
            registry=self.registry,
        )
        self.inline_calls = Counter(
            "memsvc_inline_calls",
            "Retrieve, RetrievePreview and Inject calls by where "
            "they ran: 'inline' on the event loop's thread, else the step that would "
            "have waited there and sent the call to a worker thread",
            ["ran"],
            registry=self.registry,
        )
        self.registry.register(self._state)

    def publish_state(self) -> None:
        """In a worker of several server processes: keep copying the embedding-cache and
        reindex gauges to the parent's /metrics (multiprocess files) until `close`."""
        if self._publisher is None:
            self._publisher = _StatePublisher(self._state)

    def close(self) -> None:
        super().close()
        if self._publisher is not None:
            self._publisher.close()
            self._publisher = None

    def observe_rpc(self, method: str, code: str, seconds: float) -> None:
        self.rpc_latency.labels(method).observe(seconds)
        self.rpc_total.labels(method, code).inc()

    def observe_inline(self, ran: str) -> None:
        self.inline_calls.labels(ran).inc()

    def observe_failure(self, exc: BaseException) -> None:
        """An exception an RPC failed with; a full disk is counted on its own, since only an
        operator can clear it."""
        if storage_full(exc) is not None:
            self.storage_full.inc()

    def observe_retrieval(self, strategy_used: str, fell_back: bool) -> None:
        self.retrieval_tier.labels(strategy_used).inc()
        if fell_back:
            self.retrieval_fallback.inc()
