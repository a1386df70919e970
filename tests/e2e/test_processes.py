"""`memsvc serve --processes 2`: two gRPC server processes on one port under a supervising
parent. Which worker answered a call is read from its `rpc` log line (workers' lines name
their process); SO_REUSEPORT spreads connections by hash, so channels are opened until both
workers were reached."""

from __future__ import annotations

import os
import signal
import socket
import time
import urllib.request
import uuid

import grpc
import pytest
from conftest import Stubs, make_config
from support.processes import alive, cmdline, descendants, wait_gone
from support.serve_process import ServeProcess
from support.vectors import (  # noqa: F401 - static_model and gated are fixtures
    create,
    error_info,
    gated,
    remote_settings,
    set_memory,
    static_model,
    status,
    struct,
    wait_for,
)

from memsvc.app import App
from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import engine_pb2_grpc, memory_pb2_grpc, settings_pb2_grpc
from memsvc.v1 import memory_pb2 as pb
from memsvc.v1 import settings_pb2 as spb

pytestmark = pytest.mark.e2e
MAX_CHANNELS = 200  # each new connection reaches either worker; 200 misses have odds of 2^-199
REINDEX_ROWS = 300  # the held job embeds a first batch of 128, then waits in its second embedding call


class Fleet:
    """A `serve --processes 2` subprocess and one channel to each of its workers."""

    def __init__(self, process: ServeProcess):
        self.process = process
        started = process.wait_for("server.started")
        self.port = started["grpc_port"]
        self.metrics_port = started["metrics_port"]
        self.worker_pids = started["worker_pids"]
        self.channels: list[grpc.Channel] = []

    def answered_by(self, channel: grpc.Channel) -> int:
        """The pid of the worker that serves `channel`'s connection (one call, found in the logs)."""
        request_id = uuid.uuid4().hex
        memory_pb2_grpc.MemoryServiceStub(channel).ListMemories(
            pb.ListMemoriesRequest(api_key_id="probe"), metadata=(("x-request-id", request_id),), timeout=30
        )
        line = self.process.wait_for_entry(lambda e: e.get("event") == "rpc" and e.get("request_id") == request_id)
        return line["process"]

    def channels_by_worker(self) -> dict[int, grpc.Channel]:
        """One channel per worker pid: new channels until each worker answered one."""
        found: dict[int, grpc.Channel] = {}
        for _ in range(MAX_CHANNELS):
            # A pool of its own: channels to one target otherwise share one connection.
            channel = grpc.insecure_channel(f"127.0.0.1:{self.port}", options=[("grpc.use_local_subchannel_pool", 1)])
            self.channels.append(channel)
            found.setdefault(self.answered_by(channel), channel)
            if len(found) == 2:
                return found
        raise AssertionError(f"only workers {sorted(found)} answered {MAX_CHANNELS} connections")

    def stubs_by_worker(self) -> dict[int, memory_pb2_grpc.MemoryServiceStub]:
        return {pid: memory_pb2_grpc.MemoryServiceStub(channel) for pid, channel in self.channels_by_worker().items()}

    def close(self) -> None:
        for channel in self.channels:
            channel.close()


@pytest.fixture
def fleet(tmp_path):
    started: list[tuple[ServeProcess, Fleet]] = []

    def run(env_extra: dict[str, str] | None = None) -> Fleet:
        process = ServeProcess(
            tmp_path / "data",
            0,
            0,
            env_extra=env_extra,
            extra_args=("--processes", "2", "--no-gateway", "--mcp-port", "-1", "--metrics-port", "0"),
        )
        started.append((process, None))
        handle = Fleet(process)
        started[-1] = (process, handle)
        return handle

    yield run
    for process, handle in started:
        if handle is not None:
            handle.close()
        process.stop()


def _create(stub, content: str) -> str:
    return stub.CreateMemory(pb.CreateMemoryRequest(api_key_id="owner", content=content), timeout=30).id


def test_two_workers_serve_one_port_and_a_write_through_one_is_read_through_the_other(fleet):
    handle = fleet()
    assert len(set(handle.worker_pids)) == 2
    assert set(handle.worker_pids) <= descendants(handle.process.proc.pid)
    first, second = handle.stubs_by_worker().values()
    memory_id = _create(first, "the cellar key hangs by the door")
    assert second.GetMemory(pb.GetMemoryRequest(id=memory_id), timeout=30).content == "the cellar key hangs by the door"
    listed = second.ListMemories(pb.ListMemoriesRequest(api_key_id="owner"), timeout=30)
    assert [m.id for m in listed.data] == [memory_id]


def test_get_memory_read_through_one_worker_follows_an_update_and_a_delete_through_the_other(fleet):
    handle = fleet()
    writer, reader = handle.stubs_by_worker().values()
    memory_id = _create(writer, "the boat is blue")
    assert reader.GetMemory(pb.GetMemoryRequest(id=memory_id), timeout=30).content == "the boat is blue"  # cached
    writer.UpdateMemory(pb.UpdateMemoryRequest(id=memory_id, content="the boat is green"), timeout=30)
    assert reader.GetMemory(pb.GetMemoryRequest(id=memory_id), timeout=30).content == "the boat is green"
    writer.DeleteMemory(pb.DeleteMemoryRequest(id=memory_id), timeout=30)
    with pytest.raises(grpc.RpcError) as info:
        reader.GetMemory(pb.GetMemoryRequest(id=memory_id), timeout=30)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_killed_worker_is_restarted_and_the_service_keeps_answering(fleet):
    handle = fleet()
    victim = handle.worker_pids[0]
    os.kill(victim, signal.SIGKILL)
    exited = handle.process.wait_for("worker.exited")
    assert exited["pid"] == victim and exited["level"] == "error"
    restarted = handle.process.wait_for("worker.restarted")
    assert restarted["pid"] not in handle.worker_pids and alive(restarted["pid"])
    assert restarted["pid"] in descendants(handle.process.proc.pid)
    handle.worker_pids = [restarted["pid"], handle.worker_pids[1]]
    stubs = handle.stubs_by_worker()  # both the new worker and the survivor answer
    assert set(stubs) == set(handle.worker_pids)
    memory_id = _create(stubs[restarted["pid"]], "after the restart")
    assert stubs[handle.worker_pids[1]].GetMemory(pb.GetMemoryRequest(id=memory_id), timeout=30).id == memory_id


def test_sigterm_stops_the_parent_and_every_worker(fleet):
    handle = fleet()
    handle.stubs_by_worker()
    handle.close()
    handle.process.proc.send_signal(signal.SIGTERM)
    assert handle.process.exit_code() == 0
    assert all(wait_gone(pid) for pid in handle.worker_pids)
    assert len(handle.process.events("worker.stopped")) == 2 and handle.process.events("server.stopped")


def test_workers_die_with_a_parent_killed_by_sigkill(fleet):
    handle = fleet()
    handle.process.proc.kill()
    handle.process.proc.wait(30)
    assert all(wait_gone(pid) for pid in handle.worker_pids), "a worker outlived the parent that started it"


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        return response.read().decode()


def _sample(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        series, value = line.rsplit(" ", 1)
        metric, _, rest = series.partition("{")
        if metric == name and ",".join(sorted(rest.rstrip("}").split(","))) == wanted:
            return float(value)
    raise AssertionError(f"no {name}{{{wanted}}} in /metrics")


def test_metrics_sum_the_counters_and_histograms_of_every_worker(fleet):
    handle = fleet()
    stubs = handle.stubs_by_worker()
    for count, stub in zip((3, 4), stubs.values()):
        for n in range(count):
            _create(stub, f"fact number {n}")
    text = _scrape(handle.metrics_port)
    method = "/memsvc.v1.MemoryService/CreateMemory"
    assert _sample(text, "memsvc_rpc_total", method=method, code="OK") == 7
    assert _sample(text, "memsvc_rpc_duration_seconds_count", method=method) == 7
    assert _sample(text, "memsvc_db_size_bytes") > 0  # read by the parent, once


def _settings_stub(handle: Fleet) -> settings_pb2_grpc.SettingsServiceStub:
    channel = grpc.insecure_channel(f"127.0.0.1:{handle.port}")
    handle.channels.append(channel)
    return settings_pb2_grpc.SettingsServiceStub(channel)


def test_qdrant_local_mode_is_refused_while_several_processes_serve(fleet):
    handle = fleet()
    settings = _settings_stub(handle)
    for values in ({"enabled": True, "localPath": "qdrant"}, {"localPath": ":memory:"}):
        with pytest.raises(grpc.RpcError) as info:
            settings.UpdateQdrantSettings(spb.UpdateQdrantSettingsRequest(settings=struct(values)), timeout=30)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "MEMSVC_PROCESSES=1" in info.value.details() and "server" in info.value.details()
    stored = settings.GetQdrantSettings(spb.GetQdrantSettingsRequest(), timeout=30)
    assert not stored.enabled and not stored.local_path  # nothing saved
    served = settings.UpdateQdrantSettings(
        spb.UpdateQdrantSettingsRequest(settings=struct({"host": "qdrant.internal", "port": 6334})), timeout=30
    )
    assert served.host == "qdrant.internal"  # a Qdrant server is fine


def test_stored_local_qdrant_makes_serve_run_one_process_and_say_why(tmp_path):
    app = App.open(make_config(tmp_path))  # the data dir the server below opens
    try:
        app.qdrant_settings.update({"enabled": True, "localPath": "qdrant"})
    finally:
        app.close()
    process = ServeProcess(tmp_path / "data", 0, 0, extra_args=("--processes", "2", "--no-gateway", "--mcp-port", "-1"))
    try:
        why = process.wait_for("server.single_process")
        assert why["level"] == "warning" and "Qdrant server" in why["reason"] and why["processes"] == 2
        started = process.wait_for("server.started")
        assert not process.events("worker.started")
        assert not [pid for pid in descendants(process.proc.pid) if "memsvc" in cmdline(pid)]
        with grpc.insecure_channel(f"127.0.0.1:{started['grpc_port']}") as channel:
            stored = settings_pb2_grpc.SettingsServiceStub(channel).GetQdrantSettings(
                spb.GetQdrantSettingsRequest(), timeout=30
            )
        assert stored.enabled and stored.local_path == "qdrant"
    finally:
        process.stop()


def _gauges(port: int) -> dict[str, float] | None:
    """The embedding-cache gauges; None until the workers first published them."""
    text = _scrape(port)
    if "memsvc_embedding_cache{" not in text:
        return None
    return {kind: _sample(text, "memsvc_embedding_cache", kind=kind) for kind in ("hits", "misses", "size")}


def test_the_embedding_cache_gauges_add_up_the_workers_caches(fleet, static_model):
    handle = fleet(env_extra={"MEMORY_AUTO_STATIC": "true", "MEMORY_STATIC_MODEL": str(static_model)})
    engines = [engine_pb2_grpc.EngineServiceStub(channel) for channel in handle.channels_by_worker().values()]
    request = epb.RetrievePreviewRequest(query="where is the cellar key", api_key_id="owner", strategy="semantic")
    for engine in engines:  # each worker loads the built model before it serves: no query is needed to warm it
        assert engine.GetEngineStatus(epb.GetEngineStatusRequest(), timeout=30).embedding.available
    for engine in (engines[0], engines[0], engines[1]):  # a miss and a hit in one worker, a miss in the other
        engine.RetrievePreview(request, timeout=60)
    deadline = time.monotonic() + 30
    while (gauges := _gauges(handle.metrics_port)) != {"hits": 1, "misses": 2, "size": 2}:
        assert time.monotonic() < deadline, f"the gauges stayed at {gauges}"
        time.sleep(0.1)


def test_a_grpc_port_another_program_holds_is_refused(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        process = ServeProcess(
            tmp_path / "data", port, 0, extra_args=("--processes", "2", "--no-gateway", "--mcp-port", "-1")
        )
        try:
            assert process.exit_code() == 2
        finally:
            process.stop()
    assert f"memsvc: cannot bind gRPC to 127.0.0.1:{port}" in "\n".join(process.lines)
    assert not process.events("worker.started")


def test_a_worker_that_keeps_dying_stops_serve_with_an_error(fleet):
    handle = fleet()
    killed: list[int] = []
    deadline = time.monotonic() + 180
    while handle.process.proc.poll() is None:
        pids = [handle.worker_pids[0]] + [e["pid"] for e in handle.process.events("worker.restarted")]
        if pids[-1] not in killed and alive(pids[-1]):
            os.kill(pids[-1], signal.SIGKILL)
            killed.append(pids[-1])
        assert len(killed) <= 10 and time.monotonic() < deadline, "serve should give up after bounded restarts"
        time.sleep(0.05)
    assert handle.process.exit_code() == 1
    assert len(killed) == 6  # the first worker and five restarts
    assert len(handle.process.events("worker.exited")) == 6 and handle.process.events("worker.failed")
    assert "memsvc: a server process failed: worker exited and was restarted 5 times" in "\n".join(handle.process.lines)
    assert wait_gone(handle.worker_pids[1]), "the other worker must stop with the server"


def test_a_reindex_through_one_worker_runs_in_the_others_status_and_a_killed_holder_is_recovered(fleet, gated):
    """The reindex lease across the workers of one serve: started through worker A, B's
    status shows it running and B refuses a second one; A killed mid-job (its supervisor
    restarts it), the lease expires and B's Reindex runs the rest to the end."""
    handle = fleet({"MEMSVC_LEASE_TTL_S": "2", "MEMSVC_EMBEDDING_TIMEOUT_S": "300"})
    (holder, a), (_, b) = [
        (
            pid,
            Stubs(
                memory_pb2_grpc.MemoryServiceStub(ch),
                engine_pb2_grpc.EngineServiceStub(ch),
                settings_pb2_grpc.SettingsServiceStub(ch),
            ),
        )
        for pid, ch in handle.channels_by_worker().items()
    ]
    set_memory(a, enabled=True)  # no embedding source yet: the rows wait for a reindex
    for i in range(REINDEX_ROWS):
        create(a, "key-workers", f"memory number {i} about topic {i % 13}")
    set_memory(a, **remote_settings(gated))
    running = a.engine.Reindex(epb.ReindexRequest(), timeout=120)
    assert next(running).pending == REINDEX_ROWS
    wait_for(lambda: gated.embed_calls == 2, 60, what="A's job held in its second embedding call")

    seen = wait_for(lambda: (s := status(b).reindex).running and s, 30, what="A's job in B's engine status")
    assert seen.holder.startswith(f"{holder}-") and seen.progress.processed == 128
    with pytest.raises(grpc.RpcError) as info:
        next(b.engine.Reindex(epb.ReindexRequest(), timeout=30))
    assert info.value.code() == grpc.StatusCode.ABORTED and error_info(info.value).reason == "REINDEX_RUNNING"

    os.kill(holder, signal.SIGKILL)
    assert handle.process.wait_for("worker.exited")["pid"] == holder
    wait_for(lambda: not status(b).reindex.running, 30, what="the dead holder's lease to expire")
    gated.release()
    messages = list(b.engine.Reindex(epb.ReindexRequest(), timeout=120))
    assert messages[-1].state == "done" and messages[-1].processed == REINDEX_ROWS - 128
    assert status(b).vector_store.row_count == REINDEX_ROWS
