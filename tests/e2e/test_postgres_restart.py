"""A real `memsvc serve --database-url` under load from several client threads while its
PostgreSQL restarts, is stopped for a while, or freezes (SIGSTOP): every call either succeeds
or fails with a retryable status (UNAVAILABLE, or DEADLINE_EXCEEDED when the database stopped
answering without closing its connections) and returns by its deadline; once the database is
back, calls succeed again without restarting memsvc, and every acknowledged write is there.

The PostgreSQL here is the module's own: stopping it must not fail other tests' databases."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest
from support.processes import descendants
from support.serve_process import ServeProcess

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import engine_pb2_grpc, memory_pb2_grpc
from memsvc.v1 import memory_pb2 as mpb

if TYPE_CHECKING:
    from support.postgres import PostgresServer

pytestmark = pytest.mark.e2e

#: The deadline every call of the load carries.
DEADLINE_S = 5.0
#: How late after its deadline a call may return: the client's own timer and a loaded
#: two-core machine's scheduling, not anything the server may spend.
LATE_S = 1.0
RETRYABLE = {grpc.StatusCode.UNAVAILABLE}
RETRYABLE_WHEN_FROZEN = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
OWNER = "pg-restart"


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresServer]:
    from support.postgres import running_postgres

    with running_postgres() as server:
        yield server


@pytest.fixture
def serve(pg, tmp_path: Path) -> Iterator[Callable[[int], tuple[ServeProcess, str]]]:
    """`serve(processes)`: memsvc on a database of the test's own; the server process and its
    gRPC address. Stopped afterwards, and the database left running."""
    started: list[ServeProcess] = []
    name = f"restart_{uuid.uuid4().hex[:10]}"
    url = pg.create_database(name)

    def start(processes: int) -> tuple[ServeProcess, str]:
        process = ServeProcess(
            tmp_path / "data",
            0,
            0,
            extra_args=("--processes", str(processes), "--no-gateway", "--mcp-port", "-1", "--database-url", url),
        )
        started.append(process)
        line = process.wait_for("server.started")
        return process, f"127.0.0.1:{line['grpc_port']}"

    try:
        yield start
    finally:
        for process in started:
            process.stop()
        if pg.proc.poll() is not None:
            pg.start()
        pg.drop_database(name)


@dataclass
class Call:
    method: str
    started: float
    elapsed: float
    code: grpc.StatusCode
    details: str = ""


@dataclass
class Load:
    """Client threads, each repeating CreateMemory, Retrieve and GetMemory of what it just
    created, every call with DEADLINE_S; what each call answered and how long it took."""

    address: str
    threads: int = 4
    calls: list[Call] = field(default_factory=list)
    acked: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _workers: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Load:
        for n in range(self.threads):
            worker = threading.Thread(target=self._run, args=(n,), daemon=True)
            worker.start()
            self._workers.append(worker)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(DEADLINE_S * 3 + LATE_S)
        assert not any(w.is_alive() for w in self._workers), "a client thread is stuck past its deadlines"

    def _run(self, n: int) -> None:
        with grpc.insecure_channel(self.address) as channel:
            memories = memory_pb2_grpc.MemoryServiceStub(channel)
            engine = engine_pb2_grpc.EngineServiceStub(channel)
            i = 0
            while not self._stop.is_set():
                i += 1
                content = f"client {n} remembers parcel {i} {uuid.uuid4().hex[:8]}"
                made = self._call(
                    "CreateMemory",
                    lambda: memories.CreateMemory(
                        mpb.CreateMemoryRequest(api_key_id=OWNER, content=content), timeout=DEADLINE_S
                    ),
                )
                if made is not None:
                    with self._lock:
                        self.acked[made.id] = content
                self._call(
                    "Retrieve",
                    lambda: engine.Retrieve(
                        epb.RetrieveRequest(api_key_id=OWNER, query=f"parcel {i}"), timeout=DEADLINE_S
                    ),
                )
                if made is not None:
                    self._call(
                        "GetMemory", lambda: memories.GetMemory(mpb.GetMemoryRequest(id=made.id), timeout=DEADLINE_S)
                    )

    def _call(self, method: str, call: Callable):
        started = time.monotonic()
        try:
            answer, code, details = call(), grpc.StatusCode.OK, ""
        except grpc.RpcError as err:
            answer, code, details = None, err.code(), err.details() or ""
        with self._lock:
            self.calls.append(Call(method, started, time.monotonic() - started, code, details))
        return answer

    def snapshot(self) -> list[Call]:
        with self._lock:
            return list(self.calls)

    def wait_for(self, what: str, condition: Callable[[list[Call]], bool], timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition(self.snapshot()):
            assert time.monotonic() < deadline, f"no {what} within {timeout_s} s: {self.summary()}"
            time.sleep(0.05)

    def wait_for_success_of_every_method_after(self, since: float, timeout_s: float = 60) -> None:
        """Polled: each method answered OK by a call that started after `since`."""
        methods = {"CreateMemory", "Retrieve", "GetMemory"}
        self.wait_for(
            "recovery",
            lambda calls: methods <= {c.method for c in calls if c.started > since and c.code is grpc.StatusCode.OK},
            timeout_s,
        )

    def summary(self) -> dict:
        counts: dict[tuple[str, str], int] = {}
        for c in self.snapshot():
            counts[(c.method, c.code.name)] = counts.get((c.method, c.code.name), 0) + 1
        return counts


def assert_bounded_and_retryable(load: Load, allowed: set[grpc.StatusCode]) -> None:
    """Every call answered by its deadline (plus the client's own lateness), and every failure
    with a status the client retries: never INTERNAL or UNKNOWN."""
    late = [c for c in load.snapshot() if c.elapsed > DEADLINE_S + LATE_S]
    assert not late, f"calls past their deadline: {late[:5]}"
    failed = {c.code for c in load.snapshot() if c.code is not grpc.StatusCode.OK}
    assert failed <= allowed, (
        load.summary(),
        [c for c in load.snapshot() if c.code not in allowed | {grpc.StatusCode.OK}][:5],
    )


def assert_every_acknowledged_write_is_readable(address: str, acked: dict[str, str]) -> None:
    with grpc.insecure_channel(address) as channel:
        memories = memory_pb2_grpc.MemoryServiceStub(channel)
        for memory_id, content in acked.items():
            assert memories.GetMemory(mpb.GetMemoryRequest(id=memory_id), timeout=30).content == content


def worker_pids(process: ServeProcess) -> set[int]:
    """memsvc's own processes (the parent and its server processes): unchanged if memsvc was
    not restarted."""
    return {process.proc.pid, *(pid for pid in descendants(process.proc.pid) if "memsvc" in _cmdline(pid))}


def _cmdline(pid: int) -> str:
    with suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace")
    return ""


def successes(n: int) -> Callable[[list[Call]], bool]:
    return lambda calls: sum(c.code is grpc.StatusCode.OK for c in calls) >= n


def test_a_restart_under_load_fails_calls_only_with_unavailable_and_memsvc_recovers(pg, serve):
    process, address = serve(2)
    pids = worker_pids(process)
    with Load(address) as load:
        load.wait_for("load", successes(30))
        pg.restart()
        back = time.monotonic()
        load.wait_for_success_of_every_method_after(back)
    assert_bounded_and_retryable(load, RETRYABLE)
    assert_every_acknowledged_write_is_readable(address, load.acked)
    assert process.proc.poll() is None and worker_pids(process) == pids


def test_a_database_stopped_for_seconds_is_unavailable_then_memsvc_recovers(pg, serve):
    process, address = serve(1)
    pids = worker_pids(process)
    with Load(address) as load:
        load.wait_for("load", successes(30))
        pg.stop()
        down = time.monotonic()
        try:
            # The outage is seen by every method before the server comes back.
            load.wait_for(
                "failures while down",
                lambda calls: (
                    {"CreateMemory", "Retrieve"}
                    <= {c.method for c in calls if c.started > down and c.code is not grpc.StatusCode.OK}
                ),
            )
        finally:
            pg.start()
        back = time.monotonic()
        load.wait_for_success_of_every_method_after(back)
    assert_bounded_and_retryable(load, RETRYABLE)
    assert any(c.code is grpc.StatusCode.UNAVAILABLE for c in load.snapshot())
    assert_every_acknowledged_write_is_readable(address, load.acked)
    assert process.proc.poll() is None and worker_pids(process) == pids


def _signal_cluster(pg, sig: signal.Signals) -> None:
    """The postmaster first (it forks no new backend while stopped), then every process below it."""
    os.kill(pg.pid, sig)
    for pid in descendants(pg.pid):
        with suppress(ProcessLookupError):
            os.kill(pid, sig)


def test_a_frozen_database_fails_calls_by_their_deadline_and_memsvc_recovers_after_it_resumes(pg, serve):
    process, address = serve(1)
    with Load(address) as load:
        load.wait_for("load", successes(30))
        _signal_cluster(pg, signal.SIGSTOP)
        frozen = time.monotonic()
        try:
            load.wait_for(
                "failures while frozen",
                lambda calls: sum(c.started > frozen and c.code is not grpc.StatusCode.OK for c in calls) >= 4,
            )
        finally:
            _signal_cluster(pg, signal.SIGCONT)
        resumed = time.monotonic()
        load.wait_for_success_of_every_method_after(resumed)
    assert_bounded_and_retryable(load, RETRYABLE_WHEN_FROZEN)
    assert_every_acknowledged_write_is_readable(address, load.acked)
    assert process.proc.poll() is None
