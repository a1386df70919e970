"""The `memsvc_inline_calls_total` counter of a test's server, by where the calls ran (on the
event loop's thread, "inline", or the step that sent them to a worker thread): how tests
see whether a request waited on the loop."""

from __future__ import annotations

from typing import Any

from prometheus_client import generate_latest


def inline_calls(server: Any) -> dict[str, float]:
    """{ran: count} as the server's metrics registry holds it now."""
    found: dict[str, float] = {}
    for line in generate_latest(server.app.metrics.registry).decode().splitlines():
        if line.startswith("memsvc_inline_calls_total{"):
            series, value = line.rsplit(" ", 1)
            found[series.split('ran="', 1)[1].rsplit('"', 1)[0]] = float(value)
    return found


def added(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The counts that moved between two readings, by how much."""
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}
