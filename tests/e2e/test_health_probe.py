"""`GET /healthz` through the real Envoy: the unauthenticated probe a load balancer uses. It
answers from Envoy's active gRPC health check of memsvc, so it follows memsvc's readiness
(draining or gone → 503) and says nothing but the serving status."""

from __future__ import annotations

import asyncio
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import Rest, make_config, start_gateway, start_server
from grpc_health.v1 import health_pb2

pytestmark = pytest.mark.e2e
# What Envoy puts on any reply it makes itself; nothing names memsvc, a tenant or a version.
PLAIN_HEADERS = {
    "connection",
    "content-length",
    "content-type",
    "date",
    "server",
    "x-envoy-upstream-healthchecked-cluster",
}


def _probe(rest: Rest, expected: int, timeout_s: float = 30) -> object:
    """Poll /healthz until it answers `expected` (the check runs every second)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status, body = rest.call("GET", "/healthz")
        if status == expected:
            return body
        assert time.monotonic() < deadline, f"/healthz stayed {status} {body}"
        time.sleep(0.1)


def test_healthz_answers_serving_without_a_token_and_says_nothing_else(rest):
    with urllib.request.urlopen(rest.base + "/healthz", timeout=30) as response:
        assert response.status == 200
        assert {name.lower() for name in response.headers} <= PLAIN_HEADERS
        assert response.headers.get("x-envoy-upstream-healthchecked-cluster", "") == ""
        assert response.read() == b'{"status":"SERVING"}\n'


def test_healthz_turns_503_when_memsvc_stops_serving_and_back(server, rest):
    def set_overall(status: int) -> None:
        asyncio.run_coroutine_threadsafe(server.running.health.set("", status), server.loop).result(10)

    set_overall(health_pb2.HealthCheckResponse.NOT_SERVING)
    assert _probe(rest, 503) == {"status": "NOT_SERVING"}
    set_overall(health_pb2.HealthCheckResponse.SERVING)
    assert _probe(rest, 200) == {"status": "SERVING"}


def test_healthz_is_503_once_memsvc_is_gone(tmp_path: Path):
    handle = start_server(make_config(tmp_path))
    gateway = start_gateway(handle)
    try:
        rest = Rest(f"http://127.0.0.1:{gateway.rest_port}")
        assert _probe(rest, 200) == {"status": "SERVING"}
    finally:
        handle.stop()
    try:
        assert _probe(rest, 503) == {"status": "NOT_SERVING"}
    finally:
        gateway.stop()


def test_healthz_needs_no_token_when_tokens_are_set(tmp_path: Path):
    handle = start_server(make_config(tmp_path, api_tokens=("tok-1",)))
    gateway = start_gateway(handle)
    try:
        rest = Rest(f"http://127.0.0.1:{gateway.rest_port}")
        assert rest.call("GET", "/healthz") == (200, {"status": "SERVING"})
        assert rest.call("GET", "/api/memory/health")[0] == 401
    finally:
        gateway.stop()
        handle.stop()
