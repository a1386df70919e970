"""A full disk under the data directory: creates and appends are RESOURCE_EXHAUSTED with
reason STORAGE_FULL (not INTERNAL), counted in memsvc_storage_full_total, reported by
CheckHealth (429 through Envoy); nothing acknowledged is lost and the server works again once space is freed,
without a restart.

The data directory lives on a real 8 MiB tmpfs, filled by a file beside it; mounting needs
root (CAP_SYS_ADMIN), so without it the test is skipped and says why.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Rest, make_config, start_gateway, start_server
from support.small_disk import assert_storage_full, fill, until_refused
from support.small_disk import mounted as small_disk_mount

from memsvc.metrics import MetricsFilesError, preallocate_worker_files
from memsvc.v1 import memory_pb2


@pytest.fixture
def small_disk(tmp_path: Path):
    yield from small_disk_mount(tmp_path)


def _create(stubs, i: int) -> str:
    return stubs.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(api_key_id="full", content=f"fact {i} " + "x" * 2000)
    ).id


def _append(stubs, character: str, i: int) -> None:
    stubs.memory.AppendRecentMessages(
        memory_pb2.AppendRecentMessagesRequest(
            character=character, messages=[memory_pb2.ChatItem(role="human", text=f"turn {i} " + "y" * 2000)]
        )
    )


def test_a_full_disk_is_resource_exhausted_and_the_server_recovers(small_disk, caplog):
    handle = start_server(make_config(small_disk))
    gateway = start_gateway(handle)
    try:
        rest = Rest(f"http://127.0.0.1:{gateway.settings.listen_port}")
        stubs = handle.stubs()
        before = [_create(stubs, i) for i in range(20)]
        _append(stubs, "Mia", 0)
        filler = small_disk / "filler"
        fill(filler)

        _, create_err = until_refused(lambda i: before.append(_create(stubs, 100 + i)))
        assert_storage_full(create_err)
        _, append_err = until_refused(lambda i: _append(stubs, f"Char{i}", i))
        assert_storage_full(append_err)

        status, body = rest.call("POST", "/api/memory", {"apiKeyId": "full", "content": "z" * 30_000})
        assert status == 429 and body["code"] == 8 and body["details"][0]["reason"] == "STORAGE_FULL", body
        health = stubs.memory.CheckHealth(memory_pb2.CheckHealthRequest())
        assert not health.working and "storage is" in health.error and "full" in health.error, health
        metrics = handle.app.metrics.registry
        assert metrics.get_sample_value("memsvc_storage_full_total") >= 2
        assert metrics.get_sample_value("memsvc_data_free_bytes") < 1024 * 1024
        assert not [r for r in caplog.records if r.getMessage() == "rpc.internal_error"]

        os.unlink(filler)
        after = _create(stubs, 9999)
        _append(stubs, "Nia", 1)
        assert stubs.memory.CheckHealth(memory_pb2.CheckHealthRequest()).working
        for memory_id in before + [after]:  # every acknowledged create is there
            assert stubs.memory.GetMemory(memory_pb2.GetMemoryRequest(id=memory_id)).api_key_id == "full"
        assert handle.app.database.integrity_check() == "ok"
    finally:
        gateway.stop()
        handle.stop()
    assert logging.ERROR not in {r.levelno for r in caplog.records if r.name == "memsvc.api"}


# A worker's metrics, run in a process of its own (a SIGBUS would kill pytest): it allocates
# its multiprocess files, says so, and once told (the disk is full by then) writes every
# series a worker can write: each RPC method of every service with each status code (with
# all its latency buckets), the retrieval, fallback and full-disk counters, the state gauges.
WORKER_METRICS = """
import sys
from pathlib import Path

import grpc

from memsvc.metrics import Metrics, StateSources, preallocate_worker_files
from memsvc.v1 import credentials_pb2, engine_pb2, memory_pb2, settings_pb2

preallocate_worker_files(Path(sys.argv[1]))
print("allocated", flush=True)
sys.stdin.readline()
metrics = Metrics(StateSources(embedding_cache=lambda: {"hits": 3, "misses": 4, "size": 5},
                               reindex=lambda: {f"field{i}": i for i in range(12)},
                               working_sets=lambda: {f"field{i}": i for i in range(12)}))
metrics.publish_state()
for module in (credentials_pb2, engine_pb2, memory_pb2, settings_pb2):
    for service in module.DESCRIPTOR.services_by_name.values():
        for method in service.methods:
            for code in grpc.StatusCode:
                metrics.observe_rpc(f"/{service.full_name}/{method.name}", code.name, 0.003)
for tier in ("keyword", "vector", "hybrid", "backend", "none"):
    metrics.observe_retrieval(tier, True)
metrics.storage_full.inc()
metrics.close()
print("written", flush=True)
"""


def test_a_workers_preallocated_metrics_files_take_every_series_on_a_full_disk(small_disk):
    directory = small_disk / "metrics"
    directory.mkdir()
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER_METRICS, str(directory)],
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)},
    )
    try:
        assert worker.stdout.readline() == "allocated\n", worker.stderr.read()
        sizes = {path.name: path.stat().st_size for path in directory.iterdir()}
        fill(small_disk / "filler")
        out, err = worker.communicate("go\n", timeout=120)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0 and out == "written\n", (worker.returncode, err)  # -7 is SIGBUS
    assert {path.name: path.stat().st_size for path in directory.iterdir()} == sizes  # nothing grew


def test_metrics_files_that_cannot_be_allocated_are_a_clear_error(small_disk):
    fill(small_disk / "filler")
    with pytest.raises(MetricsFilesError, match="no space left"):
        preallocate_worker_files(small_disk, pid=4242)
    assert not list(small_disk.glob("*_4242.db"))
