"""Reaching each process of a `memsvc serve`: which process answered a call is read from its
`rpc` log line (workers' lines name their process; a single-process server's lines do not,
so its answers are its own pid's); SO_REUSEPORT spreads connections by hash, so channels are
opened until every process was reached."""

from __future__ import annotations

import uuid

import grpc

from memsvc.v1 import memory_pb2 as pb
from memsvc.v1 import memory_pb2_grpc
from support.serve_process import ServeProcess

MAX_CHANNELS = 200  # each new connection reaches either of two workers; 200 misses have odds of 2^-199


def answered_by(process: ServeProcess, channel: grpc.Channel) -> int:
    """The pid of the process that serves `channel`'s connection (one call, found in the logs)."""
    request_id = uuid.uuid4().hex
    memory_pb2_grpc.MemoryServiceStub(channel).ListMemories(
        pb.ListMemoriesRequest(api_key_id="probe"), metadata=(("x-request-id", request_id),), timeout=30
    )
    line = process.wait_for_entry(lambda e: e.get("event") == "rpc" and e.get("request_id") == request_id)
    return line.get("process", process.proc.pid)


def channel_per_process(
    process: ServeProcess, port: int, count: int, opened: list[grpc.Channel]
) -> dict[int, grpc.Channel]:
    """One channel per serving pid, `count` of them: new channels (each appended to `opened`,
    for the caller to close) until each process answered one."""
    found: dict[int, grpc.Channel] = {}
    for _ in range(MAX_CHANNELS):
        # A pool of its own: channels to one target otherwise share one connection.
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
        opened.append(channel)
        found.setdefault(answered_by(process, channel), channel)
        if len(found) == count:
            return found
    raise AssertionError(f"only processes {sorted(found)} answered {MAX_CHANNELS} connections")
