"""Single-flight jobs across processes: two real `memsvc serve` processes on one data dir
(what `serve --processes N` runs), called through generated stubs.

- A reindex started through A is running in B's engine status, with A's progress; B's
  Reindex is refused (ABORTED REINDEX_RUNNING) or, with attach, follows A's job.
- A killed with SIGKILL mid-reindex: its lease expires (MEMSVC_LEASE_TTL_S is short here),
  B's attached stream ends `failed`, and B's own Reindex is then accepted and completes.

The reindex is held open by the embedding stand-in: a loopback MiniLM server that answers
the first call and holds every later one until the test releases it, so "mid-reindex" is a
state the test reaches, not a moment it guesses.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Iterator

import grpc
import pytest

from memsvc.storage.database import Database
from memsvc.storage.leases import SqliteLeaseStore
from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import engine_pb2_grpc, memory_pb2_grpc, settings_pb2_grpc
from conftest import Stubs
from support.serve_process import ServeProcess
from tests.support.vectors import C, LoopbackModels, create, error_info, one_torch_thread, remote_settings, \
    set_memory, status, wait_for

TTL_S = 2.0
ROWS = 300  # the first batch embeds 128 of them, the second call is held


class GatedModels(LoopbackModels):
    """Answers the first `free` embedding calls; holds every later one until `release()`."""

    def __init__(self, free: int) -> None:
        super().__init__()
        self.free = free
        self.gate = threading.Event()

    def _misbehave(self):
        if self.embed_calls > self.free:
            self.gate.wait(120)
        return super()._misbehave()

    def release(self) -> None:
        self.gate.set()

    def stop(self) -> None:
        self.gate.set()
        super().stop()


@pytest.fixture
def gated() -> Iterator[GatedModels]:
    one_torch_thread()
    server = GatedModels(free=1).start()
    yield server
    server.stop()


class Worker:
    """One `memsvc serve` process (no gateway, no MCP) and stubs on its gRPC port."""

    def __init__(self, data_dir: Path, env: dict[str, str]):
        self.process = ServeProcess(data_dir, 0, 0, env_extra=env, extra_args=("--no-gateway", "--mcp-port", "-1"))
        self.port = self.process.wait_for("server.started")["grpc_port"]
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.stubs = Stubs(memory_pb2_grpc.MemoryServiceStub(self.channel),
                           engine_pb2_grpc.EngineServiceStub(self.channel),
                           settings_pb2_grpc.SettingsServiceStub(self.channel))

    @property
    def pid(self) -> int:
        return self.process.proc.pid

    def stop(self) -> None:
        self.channel.close()
        self.process.stop()


@pytest.fixture
def workers(tmp_path: Path):
    started: list[Worker] = []

    def start(**env: str) -> Worker:
        # One process per `serve` (MEMSVC_PROCESSES=1): the test itself plays the workers.
        worker = Worker(tmp_path / "data", {"MEMSVC_LEASE_TTL_S": str(TTL_S), "MEMSVC_PROCESSES": "1", **env})
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def _lease_expiry(data_dir: Path) -> float:
    db = Database(data_dir / "memsvc.db")
    try:
        return SqliteLeaseStore(db).read("reindex").expires_at
    finally:
        db.close()


def test_a_reindex_through_one_process_is_single_flight_in_the_other_and_survives_its_holder_killed(
        workers, gated, tmp_path):
    a = workers(MEMSVC_EMBEDDING_TIMEOUT_S="300")  # the held call must not time out in A
    set_memory(a.stubs, enabled=True)  # no source yet: the rows wait for a reindex
    for i in range(ROWS):
        create(a.stubs, "key-lease", f"memory number {i} about topic {i % 13}")
    set_memory(a.stubs, **remote_settings(gated))
    b = workers()

    running = a.stubs.engine.Reindex(epb.ReindexRequest(), timeout=120)
    assert next(running).pending == ROWS
    wait_for(lambda: gated.embed_calls == 2, 60, what="A's job held in its second embedding call")

    seen = wait_for(lambda: (s := status(b.stubs).reindex).progress.processed == 128 and s, 30,
                    what="A's first batch in B's engine status")
    assert seen.running and seen.target == "sqlite-vec" and seen.holder.startswith(f"{a.pid}-")
    assert seen.progress.state == "running" and seen.progress.pending == ROWS - 128

    # The job is held, publishing nothing: only A's heartbeat can keep renewing its lease.
    held = _lease_expiry(tmp_path / "data")
    wait_for(lambda: _lease_expiry(tmp_path / "data") >= held + TTL_S, 30, what="A's heartbeat renewing the lease")
    assert status(b.stubs).reindex.running

    refused = b.stubs.engine.Reindex(epb.ReindexRequest(), timeout=30)
    with pytest.raises(grpc.RpcError) as info:
        next(refused)
    assert info.value.code() == C.ABORTED and error_info(info.value).reason == "REINDEX_RUNNING"
    assert gated.embed_calls == 2  # B started nothing

    attached = b.stubs.engine.Reindex(epb.ReindexRequest(attach=True), timeout=120)
    followed = next(attached)
    assert followed.state == "running" and followed.processed == 128

    a.process.proc.send_signal(signal.SIGKILL)
    assert a.process.exit_code(30) == -signal.SIGKILL
    with pytest.raises(grpc.RpcError):
        list(running)

    last = list(attached)[-1]  # ends once A's lease has expired
    assert last.state == "failed" and "stopped" in last.error and last.processed == 128
    after = status(b.stubs).reindex
    assert not after.running and after.holder == "" and after.progress.state == "failed"

    gated.release()
    messages = list(b.stubs.engine.Reindex(epb.ReindexRequest(), timeout=120))
    assert messages[0].started and messages[0].pending == ROWS - 128
    assert messages[-1].state == "done" and messages[-1].processed == ROWS - 128 and messages[-1].errors == 0
    done = status(b.stubs)
    assert not done.reindex.running and done.reindex.progress.state == "done"
    assert done.vector_store.row_count == ROWS and done.vector_store.needs_reindex == 0
