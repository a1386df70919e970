"""The Envoy gateway's life beside `memsvc serve`, through the real binaries: a REST port
that cannot be bound stops `serve` with a clear error; an Envoy that exits is noticed,
reported in gRPC health and the logs, and restarted a bounded number of times; Envoy dies
with its parent however the parent dies; its admin interface is not open over TCP."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
from conftest import Rest, free_port
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support.processes import alive, leftovers, listening_tcp_ports, wait_gone
from support.serve_process import BIN, ServeProcess

from memsvc.gateway.launcher import UnixHTTPConnection

pytestmark = pytest.mark.e2e
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture
def serve(tmp_path):
    started: list[ServeProcess] = []

    def run(rest_port: int | None = None, **kwargs) -> ServeProcess:
        process = ServeProcess(tmp_path / "data", free_port(), rest_port or free_port(), **kwargs)
        started.append(process)
        return process

    yield run
    for process in started:
        process.stop()


def _arg(process: ServeProcess, flag: str) -> int:
    args = process.proc.args
    return int(args[args.index(flag) + 1])


class HealthWatch:
    """Every overall status the server's grpc.health.v1 Watch stream sends, as it comes."""

    def __init__(self, grpc_port: int):
        self._channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        self._stream = health_pb2_grpc.HealthStub(self._channel).Watch(health_pb2.HealthCheckRequest(service=""))
        self.seen: list[int] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for response in self._stream:
                self.seen.append(response.status)
        except grpc.RpcError:
            pass

    def wait_for(self, statuses: list[int], timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while self.seen[: len(statuses)] != statuses:
            assert time.monotonic() < deadline, f"health statuses seen: {self.seen}, wanted {statuses}"
            time.sleep(0.05)

    def close(self) -> None:
        self._stream.cancel()
        self._channel.close()


def _admin(process: ServeProcess, method: str, path: str) -> tuple[int, bytes]:
    conn = UnixHTTPConnection(str(process.data_dir / "envoy-admin.sock"), 5)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _wait_until(condition, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached within the bound"
        time.sleep(0.05)


def test_a_taken_rest_port_stops_serve_with_a_clear_error_and_leaves_no_process(serve, tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        process = serve(rest_port=port)
        assert process.exit_code() == 1
    stderr = "\n".join(process.lines)
    assert f"memsvc: the REST gateway failed: REST port 127.0.0.1:{port} is already in use" in stderr
    assert "--no-gateway" in stderr
    assert not process.events("gateway.started"), "gateway.started must wait until Envoy really serves"
    assert process.events("gateway.failed") and process.events("server.stopped")
    assert leftovers(os.getpid(), str(tmp_path)) == {}


def test_no_gateway_serves_grpc_although_the_rest_port_is_taken(serve):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        process = serve(rest_port=squatter.getsockname()[1], extra_args=("--no-gateway",))
        process.wait_for("server.started")
        with grpc.insecure_channel(f"127.0.0.1:{_arg(process, '--grpc-port')}") as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
        assert reply.status == SERVING
        assert process.proc.poll() is None


def test_an_envoy_told_to_quit_is_reported_in_health_and_logs_and_restarted(serve):
    process = serve()
    first = process.wait_for("gateway.started")["pid"]
    watch = HealthWatch(_arg(process, "--grpc-port"))
    try:
        watch.wait_for([SERVING])
        assert _admin(process, "POST", "/quitquitquit")[0] == 200
        exited = process.wait_for("gateway.exited")
        assert exited["level"] == "error" and exited["pid"] == first and exited["exit_code"] == 0
        restarted = process.wait_for("gateway.restarted")
        watch.wait_for([SERVING, NOT_SERVING, SERVING])  # down while REST was down, then back
    finally:
        watch.close()
    assert restarted["pid"] != first and not alive(first)
    rest = Rest(f"http://127.0.0.1:{_arg(process, '--rest-port')}")
    assert rest.call("GET", "/api/memory/health")[1]["working"] is True


def test_an_envoy_that_keeps_dying_stops_serve_with_an_error(serve):
    process = serve()
    killed: list[int] = []
    deadline = time.monotonic() + 180
    while process.proc.poll() is None:
        pids = process.envoy_pids()
        if pids and pids[-1] not in killed and alive(pids[-1]):
            os.kill(pids[-1], signal.SIGKILL)
            killed.append(pids[-1])
        assert len(killed) <= 10 and time.monotonic() < deadline, "serve should give up after bounded restarts"
        time.sleep(0.05)
    assert process.exit_code() == 1
    assert len(killed) == 6  # the first Envoy and five restarts
    assert len(process.events("gateway.exited")) == 6 and process.events("gateway.failed")
    assert "memsvc: the REST gateway failed: envoy exited and was restarted 5 times" in "\n".join(process.lines)


def test_envoy_dies_with_memsvc_killed_by_sigkill(serve):
    process = serve()
    envoy = process.wait_for("gateway.started")["pid"]
    process.proc.kill()
    process.proc.wait(30)
    assert wait_gone(envoy), "Envoy outlived the memsvc that started it"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", _arg(process, "--rest-port")), timeout=5).close()


def _gateway_command(grpc_port: int, data: Path) -> subprocess.Popen:
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(data.parent)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memsvc",
            "gateway",
            "--data-dir",
            str(data),
            "--grpc-port",
            str(grpc_port),
            "--rest-port",
            str(free_port()),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _started_envoy(proc: subprocess.Popen) -> int:
    return json.loads(next(line for line in proc.stderr if '"gateway.started"' in line))["pid"]


def test_the_gateway_command_takes_envoy_with_it_when_killed(server, tmp_path):
    proc = _gateway_command(server.port, tmp_path / "gw")
    try:
        envoy = _started_envoy(proc)
        assert alive(envoy)
    finally:
        proc.kill()
        proc.wait(30)
        proc.stderr.close()
    assert wait_gone(envoy), "Envoy outlived the `memsvc gateway` that started it"


def test_the_gateway_command_reports_an_envoy_that_exits_on_its_own(server, tmp_path):
    proc = _gateway_command(server.port, tmp_path / "gw")
    try:
        envoy = _started_envoy(proc)
        conn = UnixHTTPConnection(str(tmp_path / "gw" / "envoy-admin.sock"), 5)
        conn.request("POST", "/quitquitquit")
        assert conn.getresponse().status == 200
        conn.close()
        assert proc.wait(60) == 0  # Envoy's own exit code
        exited = [json.loads(line) for line in proc.stderr if '"gateway.exited"' in line]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        proc.stderr.close()
    assert exited and exited[0]["level"] == "error" and exited[0]["pid"] == envoy
    assert wait_gone(envoy)


def test_envoy_admin_is_a_private_unix_socket_and_no_tcp_port(serve):
    process = serve()
    envoy = process.wait_for("gateway.started")["pid"]
    assert listening_tcp_ports(envoy) == {_arg(process, "--rest-port")}
    sock = process.data_dir / "envoy-admin.sock"
    mode = os.stat(sock).st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    assert _admin(process, "GET", "/ready") == (200, b"LIVE\n")


def test_healthz_needs_no_token_while_the_api_still_does(serve):
    process = serve(env_extra={"MEMSVC_API_TOKENS": "tok-1"})
    process.wait_for("gateway.started")
    rest = Rest(f"http://127.0.0.1:{_arg(process, '--rest-port')}")
    assert rest.call("GET", "/healthz") == (200, {"status": "SERVING"})
    assert rest.call("GET", "/api/memory/health")[0] == 401


def test_a_data_dir_too_long_for_the_admin_socket_is_refused_clearly(tmp_path):
    process = ServeProcess(tmp_path / ("d" * 100), free_port(), free_port())
    try:
        assert process.exit_code() == 1
    finally:
        process.stop()
    assert "is longer than the 107 bytes a unix socket path may have: use a shorter --data-dir" in "\n".join(
        process.lines
    )


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_the_gateway_command_stops_envoy_and_exits_0_on_sigterm_or_sigint(server, tmp_path, stop_signal):
    """systemd and Kubernetes stop with SIGTERM and wait a grace period before SIGKILL: the
    command must stop Envoy, reap it and exit 0 well within it (it once deadlocked here)."""
    proc = _gateway_command(server.port, tmp_path / "gw")
    try:
        envoy = _started_envoy(proc)
        assert alive(envoy)
        proc.send_signal(stop_signal)
        code = proc.wait(30)  # the grace period systemd and Kubernetes give by default
        logged = [json.loads(line) for line in proc.stderr if line.startswith("{")]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        proc.stderr.close()
    assert code == 0, logged
    assert wait_gone(envoy), "Envoy outlived the `memsvc gateway` told to stop"
    assert not os.path.exists(f"/proc/{envoy}"), "Envoy was left a zombie"
    exited = [entry for entry in logged if entry.get("event") == "gateway.exited"]
    assert exited and exited[0]["level"] == "info" and exited[0]["pid"] == envoy, logged
