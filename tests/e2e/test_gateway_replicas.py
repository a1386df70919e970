"""`memsvc gateway --replica … ×3` through the real binaries: one Envoy in front of three
`memsvc serve --no-gateway` replicas. Round robin spreads REST requests over all three; a
replica killed with SIGKILL costs no request (a request sent its way before its health check
fails is retried on another, never having reached it), nor any read under a continuous stream
of them (a read cut off by the kill is retried too), the others serve everything once its
check marks it down, and /healthz stays SERVING while any one replica serves.

Each replica has its own SQLite data dir here, so which replica stored a memory shows which
one answered: each is asked over gRPC how many it holds."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import yaml
from conftest import Rest
from support.processes import wait_gone
from support.serve_process import BIN, ServeProcess

from memsvc.gateway.launcher import UnixHTTPConnection
from memsvc.v1 import memory_pb2, memory_pb2_grpc

pytestmark = pytest.mark.e2e
REPLICAS = 3


@dataclass
class Replica:
    process: ServeProcess
    port: int
    channel: grpc.Channel

    def holds(self, api_key_id: str) -> int:
        """How many memories of `api_key_id` this replica's own store holds."""
        stub = memory_pb2_grpc.MemoryServiceStub(self.channel)
        return stub.ListMemories(memory_pb2.ListMemoriesRequest(api_key_id=api_key_id), timeout=10).total


class GatewayProcess(ServeProcess):
    """`memsvc gateway --replica …` with its stderr (JSON log lines) collected."""

    def __init__(self, data_dir: Path, replica_ports: list[int]):
        env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(data_dir)}
        replicas = [arg for port in replica_ports for arg in ("--replica", f"127.0.0.1:{port}")]
        self.data_dir = data_dir
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memsvc",
                "gateway",
                "--data-dir",
                str(data_dir),
                "--rest-port",
                "0",
                "--mcp-port",
                "-1",
                *replicas,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def healthy_ports(self) -> set[int]:
        """The replicas Envoy's active health check currently passes (its admin /clusters)."""
        conn = UnixHTTPConnection(str(self.data_dir / "envoy-admin.sock"), 5)
        try:
            conn.request("GET", "/clusters?format=json")
            clusters = json.loads(conn.getresponse().read())["cluster_statuses"]
        finally:
            conn.close()
        hosts = next(c for c in clusters if c["name"] == "memsvc_grpc")["host_statuses"]
        return {
            h["address"]["socket_address"]["port_value"]
            for h in hosts
            if h["health_status"].get("eds_health_status") == "HEALTHY"
            and not any(flag.startswith("failed") for flag in h["health_status"])
        }


@dataclass
class Layout:
    replicas: list[Replica]
    gateway: GatewayProcess
    rest: Rest

    def wait_healthy(self, ports: set[int], timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while (seen := self.gateway.healthy_ports()) != ports:
            assert time.monotonic() < deadline, f"healthy replicas {seen}, wanted {ports}"
            time.sleep(0.1)

    def create(self, api_key_id: str, count: int) -> None:
        """`count` memories through REST, each answered 200, /healthz SERVING after each; each
        says something of its own (a repeat would be merged into the memory it repeats)."""
        for i in range(count):
            content = f"fact {i} of batch {uuid.uuid4().hex[:8]}"
            status, body = self.rest.call("POST", "/api/memory", {"apiKeyId": api_key_id, "content": content})
            assert status == 200, (i, body)
            assert self.rest.call("GET", "/healthz") == (200, {"status": "SERVING"})

    def create_until_each_holds_some(self, api_key_id: str, replicas: list[Replica], timeout_s: float = 60) -> int:
        """Memories through REST (each answered 200) until every one of `replicas` has
        stored some: round robin reaches each of them. Returns how many were created.

        Polled rather than counted out: each Envoy worker thread balances on its own and,
        measured here, a worker may take a few seconds after a replica's first passed health
        check before it sends that replica anything."""
        deadline, created = time.monotonic() + timeout_s, 0
        while not all(replica.holds(api_key_id) for replica in replicas):
            assert time.monotonic() < deadline, [replica.holds(api_key_id) for replica in replicas]
            self.create(api_key_id, len(replicas))
            created += len(replicas)
        return created

    def kill(self, replica: Replica) -> None:
        replica.channel.close()
        replica.process.proc.send_signal(signal.SIGKILL)
        replica.process.proc.wait(30)


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[Layout]:
    started: list[ServeProcess] = []
    replicas: list[Replica] = []
    try:
        for i in range(REPLICAS):
            process = ServeProcess(
                tmp_path / f"replica{i}", 0, 0, extra_args=("--no-gateway", "--mcp-port", "-1", "--processes", "1")
            )
            started.append(process)
        for process in started:
            port = process.wait_for("server.started")["grpc_port"]
            replicas.append(Replica(process, port, grpc.insecure_channel(f"127.0.0.1:{port}")))
        gateway = GatewayProcess(tmp_path / "gateway", [r.port for r in replicas])
        started.append(gateway)
        rest_port = gateway.wait_for("gateway.started")["rest_port"]
        result = Layout(replicas, gateway, Rest(f"http://127.0.0.1:{rest_port}"))
        result.wait_healthy({r.port for r in replicas})
        yield result
    finally:
        for replica in replicas:
            replica.channel.close()
        for process in started:
            process.stop()
            wait_gone(process.proc.pid)


def test_the_gateway_logs_the_replicas_it_fronts(layout: Layout):
    started = layout.gateway.events("gateway.started")[0]
    assert started["upstreams"] == [f"127.0.0.1:{replica.port}" for replica in layout.replicas]
    assert "grpc_port" not in started  # the configured gRPC port is not what it fronts


def test_round_robin_spreads_requests_over_every_replica(layout: Layout):
    owner = f"spread-{uuid.uuid4().hex[:8]}"
    created = layout.create_until_each_holds_some(owner, layout.replicas)
    assert sum(replica.holds(owner) for replica in layout.replicas) == created


def test_a_killed_replica_costs_no_request_and_the_probe_serves_while_one_replica_does(layout: Layout):
    first, second, last = layout.replicas
    layout.kill(first)
    # Before its health check fails, requests sent its way cannot connect and go to another.
    owner = f"after-kill-{uuid.uuid4().hex[:8]}"
    layout.create(owner, 4 * REPLICAS)
    layout.wait_healthy({second.port, last.port})
    created = 4 * REPLICAS + layout.create_until_each_holds_some(owner, [second, last])
    assert second.holds(owner) + last.holds(owner) == created

    layout.kill(second)
    alone = f"alone-{uuid.uuid4().hex[:8]}"
    layout.create(alone, REPLICAS)
    layout.wait_healthy({last.port})
    layout.create(alone, REPLICAS)
    assert last.holds(alone) == 2 * REPLICAS

    layout.kill(last)
    deadline = time.monotonic() + 30
    while (reply := layout.rest.call("GET", "/healthz")) != (503, {"status": "NOT_SERVING"}):
        assert time.monotonic() < deadline, reply
        time.sleep(0.1)
    status, body = layout.rest.call("POST", "/api/memory", {"apiKeyId": alone, "content": "nowhere to go"})
    assert (status, body["code"]) == (503, 14), body


class ReadStream:
    """Reads through the gateway from several threads, back to back, until stopped: a
    ListMemories (GET) and a Retrieve (a read-only POST) in turn; every answer that is not
    200 is kept."""

    def __init__(self, rest: Rest, api_key_id: str, threads: int = 4):
        self.rest, self.api_key_id = rest, api_key_id
        self.answered = 0
        self.failures: list[tuple[str, int, object]] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        reads = (
            ("GET", f"/api/memory?apiKeyId={self.api_key_id}", None),
            ("POST", "/api/memory/retrieve", {"apiKeyId": self.api_key_id, "query": "fact"}),
        )
        while not self._stop.is_set():
            for method, path, body in reads:
                status, reply = self.rest.call(method, path, body)
                self.answered += 1
                if status != 200:
                    self.failures.append((path, status, reply))

    def wait_answered(self, count: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while self.answered < count:
            assert time.monotonic() < deadline, f"{self.answered} reads answered"
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


def test_a_replica_killed_under_a_stream_of_reads_fails_none_of_them(layout: Layout):
    """SIGKILL drops the replica's connections with Envoy at once: a read already sent to it
    (reset) and one sent before its health check fails (connect failure) are retried on
    another replica, so the clients see no failure at all."""
    owner = f"reads-{uuid.uuid4().hex[:8]}"
    layout.create(owner, REPLICAS)
    reads = ReadStream(layout.rest, owner)
    try:
        alive = {replica.port for replica in layout.replicas}
        for victim in layout.replicas[:2]:
            reads.wait_answered(reads.answered + 50)
            layout.kill(victim)
            reads.wait_answered(reads.answered + 200)
            # One failure at a time: the next kill comes once the health check has marked this
            # one down (two replicas dead and both still in rotation leave a read's three
            # attempts nowhere to go on a loaded machine).
            alive.discard(victim.port)
            layout.wait_healthy(alive)
        reads.wait_answered(reads.answered + 50)
    finally:
        reads.stop()
    assert reads.failures == [], f"{len(reads.failures)} of {reads.answered} reads failed: {reads.failures[:5]}"


def _memsvc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memsvc", *args], capture_output=True, text=True, timeout=60)


def test_gateway_config_prints_what_the_gateway_runs_for_the_listed_replicas(tmp_path: Path):
    listed = ["--replica", "10.0.0.1:50051", "--replica", "10.0.0.2:50051", "--replica", "[fd00::3]:50061"]
    printed = _memsvc("gateway-config", "--data-dir", str(tmp_path), *listed)
    assert printed.returncode == 0, printed.stderr
    assert _memsvc("gateway", "--write-only", "--data-dir", str(tmp_path), *listed).returncode == 0
    assert (tmp_path / "envoy.yaml").read_text() == printed.stdout
    printed = printed.stdout
    cluster = next(c for c in yaml.safe_load(printed)["static_resources"]["clusters"] if c["name"] == "memsvc_grpc")
    addresses = [
        e["endpoint"]["address"]["socket_address"] for e in cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    ]
    assert [(a["address"], a["port_value"]) for a in addresses] == [
        ("10.0.0.1", 50051),
        ("10.0.0.2", 50051),
        ("fd00::3", 50061),
    ]


@pytest.mark.parametrize(
    "listed, message",
    [
        (["--replica", "10.0.0.1"], "is not host:port"),
        (["--replica", "10.0.0.1:50051", "--replica", "10.0.0.1:50051"], "listed more than once"),
    ],
)
def test_a_wrong_replica_list_is_refused_and_nothing_is_written(tmp_path: Path, listed, message):
    result = _memsvc("gateway", "--write-only", "--data-dir", str(tmp_path), *listed)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not (tmp_path / "envoy.yaml").exists()
