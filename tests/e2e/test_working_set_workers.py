"""Each worker of `memsvc serve` keeps its own working sets (memsvc.working_set): a write,
update, delete or expiry through one worker is in the very next Retrieve through the other,
an owner's set never answers another owner, and a restarted server rebuilds them from the
store."""

from __future__ import annotations

import time
import urllib.request
from datetime import timedelta

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from prometheus_client.parser import text_string_to_metric_families
from support.serve_process import ServeProcess
from support.serve_workers import channel_per_process
from support.vectors import struct

from memsvc.kernel.models import utcnow
from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import engine_pb2_grpc, memory_pb2_grpc, settings_pb2_grpc
from memsvc.v1 import memory_pb2 as pb
from memsvc.v1 import settings_pb2 as spb


@pytest.fixture
def workers(tmp_path):
    """(process, [(memory stub, engine stub)] per worker) of a two-worker server, memory on."""
    process = ServeProcess(
        tmp_path / "data",
        0,
        0,
        extra_args=("--processes", "2", "--no-gateway", "--mcp-port", "-1", "--metrics-port", "0"),
    )
    opened = []
    try:
        port = process.wait_for("server.started")["grpc_port"]
        channels = list(channel_per_process(process, port, 2, opened).values())
        settings_pb2_grpc.SettingsServiceStub(channels[0]).UpdateMemorySettings(
            spb.UpdateMemorySettingsRequest(settings=struct({"enabled": True})), timeout=30
        )
        yield process, [(memory_pb2_grpc.MemoryServiceStub(c), engine_pb2_grpc.EngineServiceStub(c)) for c in channels]
    finally:
        for channel in opened:
            channel.close()
        process.stop()


def _found(engine, owner: str, query: str) -> list[str]:
    response = engine.Retrieve(epb.RetrieveRequest(api_key_id=owner, query=query, strategy="hybrid"), timeout=30)
    return [m.content for m in response.memories]


def test_a_write_through_one_worker_is_in_the_next_retrieve_through_the_other(workers):
    _, ((memory_a, engine_a), (memory_b, engine_b)) = workers
    first = memory_a.CreateMemory(
        pb.CreateMemoryRequest(api_key_id="mia-user", content="The spare key is in the blue vase"), timeout=30
    )
    # Both workers build the owner's set now: every later step is an update to a built set.
    assert _found(engine_a, "mia-user", "where is the spare key") == ["The spare key is in the blue vase"]
    assert _found(engine_b, "mia-user", "where is the spare key") == ["The spare key is in the blue vase"]

    memory_a.UpdateMemory(pb.UpdateMemoryRequest(id=first.id, content="The spare key is under the doormat"), timeout=30)
    assert _found(engine_b, "mia-user", "spare key doormat") == ["The spare key is under the doormat"]
    assert _found(engine_b, "mia-user", "blue vase") == []

    second = memory_b.CreateMemory(
        pb.CreateMemoryRequest(api_key_id="mia-user", content="The garage code is 4512"), timeout=30
    )
    assert _found(engine_a, "mia-user", "garage code") == ["The garage code is 4512"]
    memory_b.DeleteMemory(pb.DeleteMemoryRequest(id=second.id), timeout=30)
    assert _found(engine_a, "mia-user", "garage code") == []

    soon = Timestamp()
    soon.FromDatetime(utcnow() + timedelta(seconds=2))
    memory_a.CreateMemory(
        pb.CreateMemoryRequest(api_key_id="mia-user", content="The parcel locker pin is 7781", expires_at=soon),
        timeout=30,
    )
    assert _found(engine_b, "mia-user", "parcel locker pin") == ["The parcel locker pin is 7781"]
    deadline = soon.ToDatetime().replace(tzinfo=utcnow().tzinfo) + timedelta(seconds=30)
    while _found(engine_b, "mia-user", "parcel locker pin"):  # expiry is a time, compared on every request
        assert utcnow() < deadline, "an expired memory was still retrieved"


def test_an_owners_working_set_never_answers_another_owner(workers):
    _, ((memory_a, engine_a), (_, engine_b)) = workers
    for owner in ("tenant-a", "tenant-b"):
        memory_a.CreateMemory(pb.CreateMemoryRequest(api_key_id=owner, content=f"{owner} parks on level 3"), timeout=30)
    for engine in (engine_a, engine_b):
        for owner in ("tenant-a", "tenant-b"):
            assert _found(engine, owner, "where do I park") == [f"{owner} parks on level 3"]


def test_engine_status_shows_the_answering_workers_working_sets(workers):
    _, ((memory_a, engine_a), _) = workers
    # Keyed: a keyless create looks for a duplicate in the owner's working set, building it.
    memory_a.CreateMemory(
        pb.CreateMemoryRequest(api_key_id="owner-s", key="schedule:gym", content="Gym on Mondays"), timeout=30
    )
    before = engine_a.GetEngineStatus(epb.GetEngineStatusRequest(), timeout=30).working_sets
    assert _found(engine_a, "owner-s", "gym") == ["Gym on Mondays"]
    after = engine_a.GetEngineStatus(epb.GetEngineStatusRequest(), timeout=30).working_sets
    assert after.budget_bytes == 256_000_000 and after.owners == before.owners + 1
    assert after.builds == before.builds + 1 and after.bytes > before.bytes


def _working_set_gauges(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    return {
        sample.labels["field"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "memsvc_working_sets"
        for sample in family.samples
    }


def test_the_metrics_add_up_every_workers_working_sets(workers):
    process, ((memory_a, engine_a), (_, engine_b)) = workers
    metrics_port = process.wait_for("server.started")["metrics_port"]
    memory_a.CreateMemory(pb.CreateMemoryRequest(api_key_id="owner-m", content="Piano lesson on Tuesday"), timeout=30)
    for engine in (engine_a, engine_b):
        assert _found(engine, "owner-m", "piano lesson") == ["Piano lesson on Tuesday"]
    deadline = time.monotonic() + 30  # each worker publishes its gauges once a second
    while (gauges := _working_set_gauges(metrics_port)).get("owners") != 2:
        assert time.monotonic() < deadline, f"the working-set gauges stayed at {gauges}"
        time.sleep(0.1)
    assert gauges["builds"] == 2 and gauges["bytes"] > 0
    assert gauges["budget_bytes"] == 2 * 256_000_000  # the default budget, one per worker


def test_a_restarted_server_rebuilds_from_the_store(tmp_path):
    data = tmp_path / "data"
    for round_ in range(2):
        process = ServeProcess(data, 0, 0, extra_args=("--processes", "1", "--no-gateway", "--mcp-port", "-1"))
        try:
            port = process.wait_for("server.started")["grpc_port"]

            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                memory = memory_pb2_grpc.MemoryServiceStub(channel)
                engine = engine_pb2_grpc.EngineServiceStub(channel)
                settings_pb2_grpc.SettingsServiceStub(channel).UpdateMemorySettings(
                    spb.UpdateMemorySettingsRequest(settings=struct({"enabled": True})), timeout=30
                )
                if round_ == 0:
                    memory.CreateMemory(
                        pb.CreateMemoryRequest(api_key_id="owner", content="Dentist on Friday at 9"), timeout=30
                    )
                assert _found(engine, "owner", "when is the dentist") == ["Dentist on Friday at 9"]
        finally:
            process.stop()
