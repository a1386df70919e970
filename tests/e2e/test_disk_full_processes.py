"""`memsvc serve` whose data directory's filesystem fills up, with one server process and
with two (the default on a two-core machine): writes are refused with RESOURCE_EXHAUSTED /
429 STORAGE_FULL by every process, reads keep working, no process dies (the same pids serve
throughout, nothing is restarted), and writes succeed again once space is freed, without a
restart.

The data directory is on a real 8 MiB tmpfs (support.small_disk), filled by a file beside
it; without root the test is skipped and says why. Each process is reached through a channel
of its own (support.serve_workers)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import grpc
import pytest
from conftest import Rest, free_port
from support.processes import alive
from support.serve_process import ServeProcess
from support.serve_workers import channel_per_process
from support.small_disk import assert_storage_full, fill, mounted, until_refused

from memsvc.v1 import memory_pb2 as pb
from memsvc.v1 import memory_pb2_grpc

pytestmark = pytest.mark.e2e


@pytest.fixture
def small_disk(tmp_path: Path):
    yield from mounted(tmp_path)


class Served:
    """A running `serve` and one stub per server process, keyed by its pid."""

    def __init__(self, process: ServeProcess):
        self.process = process
        started = process.wait_for("server.started")
        process.wait_for("gateway.started")
        self.started = started
        self.port = started["grpc_port"]
        self.pids = started.get("worker_pids") or [process.proc.pid]
        self.channels: list[grpc.Channel] = []
        self.stubs = self.stub_per_process()

    def stub_per_process(self) -> dict[int, memory_pb2_grpc.MemoryServiceStub]:
        channels = channel_per_process(self.process, self.port, len(self.pids), self.channels)
        return {pid: memory_pb2_grpc.MemoryServiceStub(channel) for pid, channel in channels.items()}

    def assert_nothing_died(self) -> None:
        """Every process that served at the start still serves, and none was restarted."""
        assert self.process.proc.poll() is None, self.process.lines[-20:]
        assert all(alive(pid) for pid in self.pids), self.process.lines[-20:]
        died = [e for e in self.process.events() if e.get("event") in ("worker.exited", "worker.restarted")]
        assert not died, died

    def close(self) -> None:
        for channel in self.channels:
            channel.close()


@pytest.fixture
def serve(small_disk):
    """Start `memsvc serve --processes N` with its data directory on the small disk."""
    started: list[tuple[ServeProcess, Served | None]] = []

    def run(processes: int) -> tuple[Served, Rest]:
        rest_port = free_port()
        process = ServeProcess(
            small_disk / "data", 0, rest_port, extra_args=("--processes", str(processes), "--mcp-port", "-1")
        )
        started.append((process, None))
        served = Served(process)
        started[-1] = (process, served)
        return served, Rest(f"http://127.0.0.1:{rest_port}")

    yield run
    for process, served in started:
        if served is not None:
            served.close()
        process.stop()


def _create(stub: memory_pb2_grpc.MemoryServiceStub, content: str) -> str:
    return stub.CreateMemory(
        pb.CreateMemoryRequest(api_key_id="full", content=content + " " + "x" * 2000), timeout=30
    ).id


@pytest.mark.parametrize("processes", [1, 2])
def test_a_full_disk_refuses_writes_keeps_reads_and_every_process_and_recovers(serve, small_disk, processes):
    served, rest = serve(processes)
    before = [_create(stub, f"before, through {pid}") for pid, stub in served.stubs.items()]
    filler = small_disk / "filler"
    fill(filler)

    for pid, stub in served.stubs.items():
        _, err = until_refused(lambda i: before.append(_create(stub, f"filling {i} via {pid}")))
        assert_storage_full(err)
    status, body = rest.call("POST", "/api/memory", {"apiKeyId": "full", "content": "z" * 30_000})
    assert status == 429 and body["details"][0]["reason"] == "STORAGE_FULL", body
    for stub in served.stubs.values():  # every process still reads everything acknowledged
        listed = stub.ListMemories(pb.ListMemoriesRequest(api_key_id="full"), timeout=30)
        assert listed.total == len(before)
        for memory_id in before[:3] + before[-3:]:
            assert stub.GetMemory(pb.GetMemoryRequest(id=memory_id), timeout=30).id == memory_id
    served.assert_nothing_died()

    os.unlink(filler)
    after = [_create(stub, f"after, through {pid}") for pid, stub in served.stubs.items()]
    status, body = rest.call("POST", "/api/memory", {"apiKeyId": "full", "content": "space again"})
    assert status == 200 and body["success"], body
    for stub in served.stubs.values():
        for memory_id in after:
            assert stub.GetMemory(pb.GetMemoryRequest(id=memory_id), timeout=30).id == memory_id
    served.assert_nothing_died()


def test_a_worker_killed_while_the_disk_is_full_comes_back_and_refuses_writes_as_documented(serve, small_disk):
    served, rest = serve(2)
    fill(small_disk / "filler")
    victim = served.pids[0]
    os.kill(victim, signal.SIGKILL)
    restarted = served.process.wait_for("worker.restarted")
    assert served.process.events("worker.exited")[0]["pid"] == victim
    served.pids = [restarted["pid"], served.pids[1]]
    served.stubs = served.stub_per_process()  # the new worker answers, as does the other
    for stub in served.stubs.values():
        _, err = until_refused(lambda i: _create(stub, f"while full {i}"))
        assert_storage_full(err)
    assert len(served.process.events("worker.exited")) == 1 and served.process.proc.poll() is None
    assert all(alive(pid) for pid in served.pids)


def test_the_metrics_files_are_off_the_data_disk_and_removed_at_exit(serve, small_disk):
    served, _ = serve(2)
    metrics_dir = Path(served.started["metrics_dir"])
    assert metrics_dir.is_dir() and not metrics_dir.is_relative_to(small_disk)
    assert os.stat(metrics_dir).st_dev != os.stat(small_disk).st_dev
    assert {p.name for p in metrics_dir.iterdir()} >= {f"counter_{pid}.db" for pid in served.pids}
    assert not list(small_disk.rglob("*_*.db"))  # no worker's file on the data disk
    served.process.proc.send_signal(signal.SIGTERM)
    assert served.process.exit_code() == 0
    assert not metrics_dir.exists()
