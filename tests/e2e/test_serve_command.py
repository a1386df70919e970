"""`memsvc serve` as an operator runs it: a subprocess with the gateway, JSON logs, and a
clean stop on SIGTERM. (docs/configuration.md's table is checked against the config in
tests/unit/test_readme_rules.py; the documents' commands run in test_readme.py.)"""

from __future__ import annotations

import signal
import socket

import pytest
from conftest import Rest, free_port
from support.serve_process import ServeProcess

pytestmark = pytest.mark.e2e


@pytest.fixture
def serve(tmp_path):
    started: list[ServeProcess] = []

    def run(**kwargs) -> ServeProcess:
        process = ServeProcess(tmp_path / "data", free_port(), free_port(), **kwargs)
        started.append(process)
        return process

    yield run
    for process in started:  # stopped in order, so no Envoy is left behind
        process.stop()


def _ports(process: ServeProcess) -> tuple[int, int]:
    args = process.proc.args
    return int(args[args.index("--grpc-port") + 1]), int(args[args.index("--rest-port") + 1])


def test_serve_starts_grpc_and_the_gateway_logs_json_and_stops_on_sigterm(serve):
    process = serve()
    process.wait_for("gateway.started")
    _, rest_port = _ports(process)
    rest = Rest(f"http://127.0.0.1:{rest_port}")
    status, body = rest.call("POST", "/api/memory", {"apiKeyId": "ops", "content": "secret plans for friday"})
    assert status == 200 and body["success"]
    assert rest.call("GET", "/api/memory/health")[1]["working"] is True

    rpc_lines = [e for e in process.events() if e.get("event") == "rpc"]
    create = next(e for e in rpc_lines if e["method"] == "/memsvc.v1.MemoryService/CreateMemory")
    assert create["code"] == "OK" and create["request_id"] and create["duration_ms"] >= 0
    assert not any("secret plans" in line for line in process.lines), "memory contents must not be logged"

    process.proc.send_signal(signal.SIGTERM)
    assert process.proc.wait(30) == 0
    assert any(e.get("event") == "server.stopped" for e in process.events())
    with pytest.raises(OSError):  # Envoy stopped with the server
        socket.create_connection(("127.0.0.1", rest_port), timeout=1).close()


def test_serve_with_tokens_requires_them_over_rest(serve):
    process = serve(env_extra={"MEMSVC_API_TOKENS": "tok-1,tok-2"})
    process.wait_for("gateway.started")
    _, rest_port = _ports(process)
    assert Rest(f"http://127.0.0.1:{rest_port}").call("GET", "/api/memory")[0] == 401
    assert Rest(f"http://127.0.0.1:{rest_port}", token="tok-2").call("GET", "/api/memory")[0] == 200
    assert not any("tok-1" in line for line in process.lines), "tokens must not be logged"
