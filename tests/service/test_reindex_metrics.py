"""The reindex gauges follow the database's reindex, whichever process ran it: two servers
on one data dir (what `serve --processes 2` runs), a reindex through one, the other's
/metrics registry reports its progress."""

from __future__ import annotations

from conftest import make_config, start_server
from prometheus_client import generate_latest

from memsvc.v1 import engine_pb2 as epb
from tests.support.vectors import create, set_memory, static_model, warm  # noqa: F401 - static_model is a fixture

TOTAL = 40


def _gauges(server) -> dict[str, float]:
    found = {}
    for line in generate_latest(server.app.metrics.registry).decode().splitlines():
        if line.startswith("memsvc_reindex{"):
            series, value = line.rsplit(" ", 1)
            found[series.split('field="', 1)[1].split('"', 1)[0]] = float(value)
    return found


def test_a_reindex_through_one_server_shows_in_the_other_servers_gauges(tmp_path, static_model):
    config = make_config(tmp_path, static_model=str(static_model))
    a, b = start_server(config), start_server(config)
    try:
        stubs = a.stubs()
        set_memory(stubs, enabled=True)  # no source yet: the rows wait for a reindex
        for i in range(TOTAL):
            create(stubs, "key-gauges", f"memory number {i}")
        set_memory(stubs, embeddingSource="static", staticEnabled=True)
        warm(a)
        assert _gauges(b) == {}  # no reindex has run on this database
        messages = list(stubs.engine.Reindex(epb.ReindexRequest(), timeout=120))
        assert messages[-1].state == "done" and messages[-1].processed == TOTAL
        assert _gauges(b) == {
            "pending": 0.0,
            "processed": float(TOTAL),
            "errors": 0.0,
            "rate_per_second": messages[-1].rate_per_second,
            "running": 0.0,
        }
    finally:
        b.stop()
        a.stop()
