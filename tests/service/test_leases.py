"""Single-flight jobs across processes: two real `memsvc serve` processes on one data dir
(what `serve --processes N` runs), called through generated stubs.

- A reindex started through A is running in B's engine status, with A's progress; B's
  Reindex is refused (ABORTED REINDEX_RUNNING) or, with attach, follows A's job.
- A killed with SIGKILL mid-reindex: its lease expires (MEMSVC_LEASE_TTL_S is short here),
  B's attached stream ends `failed`, and B's own Reindex is then accepted and completes.
- A and B appending to one character in turn, each flushing at once: every acknowledged
  message is in the file, once, in order.
- In one in-process server: a job whose lease another process took over stops, failed.

The reindex is held open by the embedding stand-in: a loopback MiniLM server that answers
the first call and holds every later one until the test releases it, so "mid-reindex" is a
state the test reaches, not a moment it guesses.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import grpc
import pytest
from conftest import Stubs
from support.serve_process import ServeProcess

from memsvc.storage.database import Database
from memsvc.storage.leases import SqliteLeaseStore
from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import engine_pb2_grpc, memory_pb2_grpc, settings_pb2_grpc
from memsvc.v1 import memory_pb2 as mpb
from tests.support.vectors import (  # noqa: F401 - models and gated are fixtures
    C,
    GatedModels,
    LoopbackModels,
    create,
    error_info,
    gated,
    models,
    one_torch_thread,
    remote_settings,
    set_memory,
    sql,
    status,
    wait_for,
)

TTL_S = 2.0
ROWS = 300  # the first batch embeds 128 of them, the second call is held


class Worker:
    """One `memsvc serve` process (no gateway, no MCP) and stubs on its gRPC port."""

    def __init__(self, data_dir: Path, env: dict[str, str]):
        self.process = ServeProcess(data_dir, 0, 0, env_extra=env, extra_args=("--no-gateway", "--mcp-port", "-1"))
        self.port = self.process.wait_for("server.started")["grpc_port"]
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.stubs = Stubs(
            memory_pb2_grpc.MemoryServiceStub(self.channel),
            engine_pb2_grpc.EngineServiceStub(self.channel),
            settings_pb2_grpc.SettingsServiceStub(self.channel),
        )

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


def _reindex_held_in_a(workers, gated: GatedModels):
    """A (whose held embedding call must not time out) and B on one data dir, ROWS memories
    pending, and a Reindex through A held after its first batch: (a, b, A's stream)."""
    a = workers(MEMSVC_EMBEDDING_TIMEOUT_S="300")
    set_memory(a.stubs, enabled=True)  # no source yet: the rows wait for a reindex
    for i in range(ROWS):
        create(a.stubs, "key-lease", f"memory number {i} about topic {i % 13}")
    set_memory(a.stubs, **remote_settings(gated))
    b = workers()
    running = a.stubs.engine.Reindex(epb.ReindexRequest(), timeout=120)
    assert next(running).pending == ROWS
    wait_for(lambda: gated.embed_calls == 2, 60, what="A's job held in its second embedding call")
    return a, b, running


def test_a_reindex_through_one_process_is_single_flight_in_the_other_and_survives_its_holder_killed(
    workers, gated, tmp_path
):
    a, b, running = _reindex_held_in_a(workers, gated)

    seen = wait_for(
        lambda: (s := status(b.stubs).reindex).progress.processed == 128 and s,
        30,
        what="A's first batch in B's engine status",
    )
    assert seen.running and seen.target == "local" and seen.holder.startswith(f"{a.pid}-")
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


# ---- appended messages: one flusher per character at a time --------------------------------

CHARACTER = "Lan"
APPENDS = 120


def _append(worker: Worker, text: str) -> None:
    worker.stubs.memory.AppendRecentMessages(
        mpb.AppendRecentMessagesRequest(character=CHARACTER, messages=[mpb.ChatItem(role="human", text=text)]),
        timeout=30,
    )


def _history(data_dir: Path) -> list[str]:
    text = (data_dir / "memory" / CHARACTER / "recent.json").read_text(encoding="utf-8")
    return [m["data"]["content"] for m in json.loads(text)]


def _pending_rows(data_dir: Path) -> int:
    db = Database(data_dir / "memsvc.db")
    try:
        with db.read() as conn:
            return int(conn.execute("SELECT count(*) FROM recent_pending").fetchone()[0])
    finally:
        db.close()


def test_two_processes_appending_to_one_character_alternately_keep_every_message_in_order(workers, tmp_path):
    """Each append triggers a flush at once in the process that took it, so both processes'
    flushers write the one file all the time: every acknowledged message must end up in it,
    exactly once, in the order the appends were acknowledged."""
    flush_at_once = {"MEMSVC_RECENT_FLUSH_MESSAGES": "1", "MEMSVC_RECENT_FLUSH_S": "0.01"}
    a, b = workers(**flush_at_once), workers(**flush_at_once)
    sent = [f"message {i} through {'AB'[i % 2]}" for i in range(APPENDS)]
    for i, text in enumerate(sent):
        _append((a, b)[i % 2], text)
    shown = a.stubs.memory.GetRecentFile(mpb.GetRecentFileRequest(filename=f"recent_{CHARACTER}.json"))
    assert [m["data"]["content"] for m in json.loads(shown.content)] == sent
    a.stop()  # a stop flushes what its process still has pending
    b.stop()
    assert _history(tmp_path / "data") == sent
    assert _pending_rows(tmp_path / "data") == 0


def test_a_job_whose_lease_another_process_took_over_stops_and_leaves_that_holder_alone(boot, models):
    """A holder stalled past its TTL may find another process holding the lease: it must
    stop (the other one now runs the reindex) and must not release what is no longer its."""
    server, stubs = boot()
    set_memory(stubs, enabled=True)
    for i in range(5):
        create(stubs, "key-lost", f"memory number {i}")
    set_memory(stubs, **remote_settings(models))
    models.mode = "slow"
    models.delay_s = 30.0  # released by reset() below
    call = stubs.engine.Reindex(epb.ReindexRequest(), timeout=60)
    assert next(call).pending == 5
    wait_for(lambda: models.embed_calls == 1, what="the job's first embedding call")
    sql(
        server,
        "UPDATE leases SET holder = 'another-process', expires_at = ? WHERE name = 'reindex'",
        (time.time() + 60,),
    )
    models.reset()
    last = list(call)[-1]
    assert last.state == "failed" and "took over" in last.error
    assert sql(server, "SELECT holder, expires_at > ? FROM leases WHERE name = 'reindex'", (time.time(),)) == [
        ("another-process", 1)
    ]
    now = status(stubs).reindex
    assert now.running and now.holder == "another-process"
