"""The parent's /metrics over the workers' multiprocess files: a worker's file that exists
but is not sized yet (prometheus_client creates it empty, then sizes it; a worker killed in
between leaves it so for good) is left out instead of failing every scrape."""

from __future__ import annotations

import json

from prometheus_client import generate_latest
from prometheus_client.mmap_dict import MmapedDict, mmap_key

from memsvc.metrics import ProcessesMetrics, StateSources


def _worker_file(directory, pid: int, value: float) -> None:
    """What a worker's counter writes: one sample in counter_<pid>.db."""
    store = MmapedDict(str(directory / f"counter_{pid}.db"))
    labels = {"method": "/memsvc.v1.MemoryService/CreateMemory", "code": "OK"}
    store.write_value(
        mmap_key("memsvc_rpc_total", "memsvc_rpc_total", list(labels), list(labels.values()), ""), value, 0.0
    )
    store.close()


def test_an_empty_worker_file_is_left_out_and_the_others_are_summed(tmp_path):
    directory = tmp_path / "prometheus"
    metrics = ProcessesMetrics(directory, StateSources(db_path=str(tmp_path / "absent.db")))
    _worker_file(directory, 101, 3)
    _worker_file(directory, 102, 4)
    (directory / "counter_103.db").touch()  # created, never sized: its worker was killed
    text = generate_latest(metrics.registry).decode()
    line = next(l for l in text.splitlines() if l.startswith("memsvc_rpc_total{"))
    assert line.endswith(" 7.0") and json.dumps("OK") in line
