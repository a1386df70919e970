"""The change feed (WatchMemories) across processes, through the real binaries: a follower
that disconnects mid-stream and resumes with its last token gets every event once, whichever
process it reconnects to and whichever process made the changes.

- `memsvc serve --processes 2` on one SQLite file, the follower reading the REST stream
  through Envoy as it grows (a JSON array), the writes spread over both workers.
- Two `memsvc serve` replicas on one PostgreSQL, writing concurrently (transactions commit in
  another order than they began), the follower moving from one replica to the other; a
  tenant's follower never carries another tenant's event.
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from conftest import free_port
from support.json_stream import ArrayStream
from support.serve_process import ServeProcess
from support.serve_workers import channel_per_process

from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import memory_pb2_grpc

pytestmark = pytest.mark.e2e


def watch_path(**query: str) -> str:
    return "/api/memory/watch?" + urllib.parse.urlencode(query)


def changes(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["kind"], e["memoryId"]) for e in events if e["kind"] != "bookmark"]


def read_until(stream: Iterator[dict], count: int) -> list[dict]:
    """Events of `stream` up to and including the `count`-th change."""
    out: list[dict] = []
    for event in stream:
        out.append(event)
        if len(changes(out)) == count:
            return out
    raise AssertionError(f"the stream ended after {len(changes(out))} of {count} changes")


@pytest.fixture
def two_workers(tmp_path: Path):
    rest_port = free_port()
    process = ServeProcess(tmp_path / "data", 0, rest_port, extra_args=("--processes", "2", "--mcp-port", "-1"))
    opened: list[grpc.Channel] = []
    try:
        port = process.wait_for("server.started")["grpc_port"]
        process.wait_for("gateway.started", timeout_s=120)
        channels = list(channel_per_process(process, port, 2, opened).values())
        yield rest_port, [memory_pb2_grpc.MemoryServiceStub(c) for c in channels]
    finally:
        for channel in opened:
            channel.close()
        process.stop()


def test_a_follower_through_envoy_resumes_across_two_workers_and_misses_nothing(two_workers):
    rest_port, (worker_a, worker_b) = two_workers
    stream = ArrayStream("127.0.0.1", rest_port, watch_path(apiKeyId="alice"))
    assert stream.status == 200
    events = iter(stream)
    assert next(events)["kind"] == "bookmark"  # the stream has started: what follows is after it
    made = []
    for n in range(6):
        worker = worker_a if n % 2 == 0 else worker_b
        made.append(
            worker.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", content=f"note {n}"), timeout=30).id
        )
    first = read_until(events, 3)
    stream.close()  # cut mid-stream: three events read, three more already committed
    for n in range(6, 9):
        worker = worker_b if n % 2 == 0 else worker_a
        made.append(
            worker.CreateMemory(mpb.CreateMemoryRequest(api_key_id="alice", content=f"note {n}"), timeout=30).id
        )
    token = [e for e in first if e["kind"] != "bookmark"][-1]["resumeToken"]
    resumed = ArrayStream(
        "127.0.0.1", rest_port, watch_path(apiKeyId="alice", resumeToken=token, stopWhenCaughtUp="true")
    )
    rest = list(resumed)
    resumed.close()
    got = changes(first) + changes(rest)
    assert got == [("created", memory_id) for memory_id in made]
    assert rest[-1]["kind"] == "bookmark"


@pytest.fixture
def two_replicas(tmp_path: Path, postgres_db_url: str):
    replicas: list[ServeProcess] = []
    stubs = []
    opened: list[grpc.Channel] = []
    try:
        for name in ("a", "b"):
            process = ServeProcess(
                tmp_path / name,
                0,
                0,
                extra_args=("--no-gateway", "--mcp-port", "-1", "--processes", "1", "--database-url", postgres_db_url),
            )
            replicas.append(process)
            port = process.wait_for("server.started")["grpc_port"]
            opened.append(grpc.insecure_channel(f"127.0.0.1:{port}"))
            stubs.append(memory_pb2_grpc.MemoryServiceStub(opened[-1]))
        yield stubs
    finally:
        for channel in opened:
            channel.close()
        for process in replicas:
            process.stop()


def follow(stub, **request: object) -> tuple[grpc.Future, Iterator[mpb.MemoryEvent]]:
    call = stub.WatchMemories(mpb.WatchMemoriesRequest(**request), timeout=120)
    return call, iter(call)


def test_concurrent_writes_through_two_postgres_replicas_reach_a_resumed_follower_once(two_replicas):
    replica_a, replica_b = two_replicas
    call, events = follow(replica_a, api_key_id="alice")
    start = next(events)
    assert start.kind == "bookmark"
    made: list[str] = []
    lock = threading.Lock()

    def write(stub, prefix: str) -> None:
        for n in range(15):
            for owner in ("alice", "bob"):
                memory_id = stub.CreateMemory(
                    mpb.CreateMemoryRequest(api_key_id=owner, content=f"{prefix} {owner} {n}"), timeout=30
                ).id
                if owner == "alice":
                    with lock:
                        made.append(memory_id)

    # Distinct texts: a repeat would be merged into the first (one memory, an `updated` event).
    writers = [
        threading.Thread(target=write, args=(stub, name)) for stub, name in ((replica_a, "Lisbon"), (replica_b, "Oslo"))
    ]
    for writer in writers:
        writer.start()
    seen: list[mpb.MemoryEvent] = []
    for event in events:  # read part of it while both replicas still write
        if event.kind != "bookmark":
            seen.append(event)
        if len(seen) == 10:
            break
    call.cancel()
    for writer in writers:
        writer.join(60)
    assert len(made) == 30
    rest = list(
        replica_b.WatchMemories(
            mpb.WatchMemoriesRequest(api_key_id="alice", resume_token=seen[-1].resume_token, stop_when_caught_up=True),
            timeout=60,
        )
    )
    got = [e.memory_id for e in seen + rest if e.kind != "bookmark"]
    assert sorted(got) == sorted(made) and len(got) == len(set(got)) == 30
    assert {e.api_key_id for e in seen + rest if e.kind != "bookmark"} == {"alice"}
    # The order is one order: a follower starting at the same place on the other replica sees it too.
    again = [
        e.memory_id
        for e in replica_b.WatchMemories(
            mpb.WatchMemoriesRequest(api_key_id="alice", resume_token=start.resume_token, stop_when_caught_up=True),
            timeout=60,
        )
        if e.kind != "bookmark"
    ]
    assert again == got


def test_a_bad_token_through_envoy_is_an_error_answer_not_a_stream(rest):
    """The token is checked before the stream's first message: a REST client gets the 400
    error body, not a 200 array that stops."""
    status, body = rest.call("GET", watch_path(resumeToken="not-a-position"))
    assert status == 400 and body["code"] == 3 and "resumeToken" in body["message"], body
    status, body = rest.call("GET", watch_path(stopWhenCaughtUp="true"))
    assert status == 200 and [e["kind"] for e in body] == ["bookmark", "bookmark"], body
