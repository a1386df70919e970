"""A `memsvc serve` killed (SIGKILL, with every process it runs) while many clients are
connected, then restarted at once on the same ports, as a supervisor (systemd,
Kubernetes) does after a crash: the new one serves within seconds.

The killed processes' sockets on the gRPC port (and usually Envoy's on the REST port) are
left in TIME_WAIT when the kernel closed them with a FIN (a reset leaves none), and the test
adds one of its own on the gRPC port so the state never depends on that; it is checked in
/proc/net/tcp before the restart and still there once it serves, so the test proves what it
claims: a bind that does not allow address reuse fails on them for about a minute."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import time
from pathlib import Path

import grpc
import pytest
from conftest import free_port
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support.processes import descendants, wait_gone
from support.serve_process import ServeProcess

pytestmark = pytest.mark.e2e
CONNECTIONS = 40  # per port; each a connection of its own
TIME_WAIT = "06"  # the state column of /proc/net/tcp


def _time_wait_ports() -> set[int]:
    """Local ports with a connection in TIME_WAIT."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            if cols[3] == TIME_WAIT:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def _leave_time_wait(port: int) -> None:
    """A connection on `port` closed by its server side first, which leaves that side in
    TIME_WAIT on `port`: a killed server's own connections leave it only when the kernel
    closed them with a FIN, not when unread data made it a reset, so the test makes sure."""
    with socket.socket() as listener:
        # As the killed server's sockets were (SO_REUSEPORT for several processes): a bind
        # beside their TIME_WAIT connections needs the same options.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen()
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        accepted, _ = listener.accept()
        accepted.close()  # the server side closes first
        client.recv(1)  # its FIN has arrived
        client.close()


def _load(grpc_port: int, rest_port: int) -> tuple[list[grpc.Channel], list[http.client.HTTPConnection]]:
    """CONNECTIONS gRPC channels and CONNECTIONS REST connections, each having answered a
    health check and kept open."""
    channels, connections = [], []
    for _ in range(CONNECTIONS):
        channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}", options=[("grpc.use_local_subchannel_pool", 1)])
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
        channels.append(channel)
        conn = http.client.HTTPConnection("127.0.0.1", rest_port, timeout=30)
        conn.request("GET", "/healthz")
        assert conn.getresponse().read()
        connections.append(conn)
    return channels, connections


def _serving(grpc_port: int, rest_port: int) -> bool:
    try:
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2).status
        conn = http.client.HTTPConnection("127.0.0.1", rest_port, timeout=2)
        conn.request("GET", "/healthz")
        rest = conn.getresponse().status
        conn.close()
    except (grpc.RpcError, OSError):
        return False
    return status == health_pb2.HealthCheckResponse.SERVING and rest == 200


@pytest.mark.parametrize("before, after", [("1", "1"), ("2", "2"), ("1", "2"), ("2", "1")])
def test_a_serve_killed_under_load_is_serving_again_at_once_on_the_same_ports(tmp_path, before, after):
    """With one process and several (whose sockets differ: SO_REUSEPORT), either way round."""
    grpc_port, rest_port = free_port(), free_port()
    first = ServeProcess(
        tmp_path / "data", grpc_port, rest_port, extra_args=("--processes", before, "--mcp-port", "-1")
    )
    second = None
    try:
        first.wait_for("gateway.started")
        channels, connections = _load(grpc_port, rest_port)
        # A crash of the whole service (the kernel's OOM killer, a cgroup's SIGKILL): every
        # process at once, so the server side closes the connections and keeps TIME_WAIT.
        killed = {first.proc.pid, *descendants(first.proc.pid)}
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        first.proc.wait(30)
        for pid in killed:  # every listener of the killed server is closed
            assert wait_gone(pid), f"process {pid} outlived SIGKILL"
        for channel in channels:
            channel.close()
        for conn in connections:
            conn.close()
        _leave_time_wait(grpc_port)
        deadline = time.monotonic() + 30
        while grpc_port not in _time_wait_ports():
            assert time.monotonic() < deadline, "no connection on the gRPC port is in TIME_WAIT"
            time.sleep(0.05)

        second = ServeProcess(
            tmp_path / "data", grpc_port, rest_port, extra_args=("--processes", after, "--mcp-port", "-1")
        )
        deadline = time.monotonic() + 90  # generous: start-up on a loaded machine, not a bound
        while not _serving(grpc_port, rest_port):
            assert second.proc.poll() is None, f"the restart exited {second.proc.returncode}: {second.lines[-10:]}"
            assert time.monotonic() < deadline, second.lines[-10:]
            time.sleep(0.1)
        assert grpc_port in _time_wait_ports(), "TIME_WAIT was gone before the restart bound"
    finally:
        for process in (first, second):
            if process is not None:
                process.stop()
                wait_gone(process.proc.pid)
