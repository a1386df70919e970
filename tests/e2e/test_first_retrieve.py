"""The first Retrieve after `memsvc serve` starts, on every worker, is hybrid: each server
process loads the embedding model the stored settings select before it binds its port and
reports SERVING, so no request falls back to keywords because the model is still loading.

The data dir is prepared by a first `serve` (memory enabled, one memory with its vector);
the server under test is a second `serve` on it, with one process and with two. With two,
channels are opened until both workers answered a Retrieve (which worker answered is read
from its `rpc` log line): every Retrieve, so each worker's first, must be hybrid."""

from __future__ import annotations

import uuid

import grpc
import pytest
from conftest import Stubs
from support.serve_process import ServeProcess
from support.vectors import create, preview, set_memory, static_model, wait_for  # noqa: F401 - fixture

from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import engine_pb2_grpc, memory_pb2_grpc, settings_pb2_grpc

pytestmark = pytest.mark.e2e
OWNER = "key-first"
FACT = "I keep the spare bicycle key in the blue teapot"
QUERY = "where is the spare key for my bike"
MAX_CHANNELS = 200  # each new connection reaches either worker; 200 misses have odds of 2^-199


def serve(data_dir, static_folder, *args: str) -> ServeProcess:
    return ServeProcess(
        data_dir,
        0,
        0,
        env_extra={"MEMORY_AUTO_STATIC": "true", "MEMORY_STATIC_MODEL": str(static_folder)},
        extra_args=("--no-gateway", "--mcp-port", "-1", *args),
    )


def stubs_for(channel: grpc.Channel) -> Stubs:
    return Stubs(
        memory_pb2_grpc.MemoryServiceStub(channel),
        engine_pb2_grpc.EngineServiceStub(channel),
        settings_pb2_grpc.SettingsServiceStub(channel),
    )


def prepare(data_dir, static_folder) -> str:
    """Memory enabled (embeddingSource auto, the built static model) and one memory whose
    vector is stored; the server is stopped afterwards."""
    process = serve(data_dir, static_folder)
    try:
        port = process.wait_for("server.started")["grpc_port"]
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stubs = stubs_for(channel)
            set_memory(stubs, enabled=True)
            memory_id = create(stubs, OWNER, FACT)
            wait_for(
                lambda: (
                    preview(stubs, QUERY, OWNER).memories[:1]
                    and preview(stubs, QUERY, OWNER).memories[0].HasField("vec_score")
                ),
                60,
                what="the memory's vector",
            )
        return memory_id
    finally:
        process.stop()


def retrieve(process: ServeProcess, channel: grpc.Channel) -> tuple[int, epb.RetrieveResponse]:
    """One Retrieve and the pid of the process that answered it."""
    request_id = uuid.uuid4().hex
    reply = engine_pb2_grpc.EngineServiceStub(channel).Retrieve(
        epb.RetrieveRequest(api_key_id=OWNER, query=QUERY), metadata=(("x-request-id", request_id),), timeout=60
    )
    line = process.wait_for_entry(lambda e: e.get("event") == "rpc" and e.get("request_id") == request_id)
    return line.get("process", process.proc.pid), reply


def assert_hybrid(reply: epb.RetrieveResponse, memory_id: str) -> None:
    resolution = reply.resolution
    assert resolution.fallback_reason == "", resolution.fallback_reason
    assert "hybrid" in resolution.strategy_used and resolution.embedding_source == "static"
    assert reply.memories[0].id == memory_id and reply.memories[0].HasField("vec_score")


@pytest.mark.parametrize("processes", [1, 2])
def test_the_first_retrieve_on_every_server_process_is_hybrid(tmp_path, static_model, processes):
    data_dir = tmp_path / "data"
    memory_id = prepare(data_dir, static_model)
    process = serve(data_dir, static_model, "--processes", str(processes))
    channels: list[grpc.Channel] = []
    try:
        port = process.wait_for("server.started")["grpc_port"]
        answered: set[int] = set()
        for _ in range(MAX_CHANNELS):
            channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
            channels.append(channel)
            pid, reply = retrieve(process, channel)
            assert_hybrid(reply, memory_id)
            answered.add(pid)
            if len(answered) == processes:
                break
        assert len(answered) == processes, f"only processes {sorted(answered)} answered"
    finally:
        for channel in channels:
            channel.close()
        process.stop()
