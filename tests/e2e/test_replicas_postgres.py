"""Three `memsvc serve` replicas sharing one PostgreSQL database, behind one Envoy (the
real binary, rendered for several replicas: round robin over those whose gRPC health check
passes). Each replica has a data dir of its own, as replicas on other hosts have, and no
Envoy of its own (`--no-gateway`).

Proved here: a write through one replica is read through the others at once (directly and
through Envoy's round robin); a reindex started through one is seen running through the
others and a second start is refused until it finishes, once; a replica killed with SIGKILL
during a stream of acknowledged writes loses none of them and the others keep answering;
a replica started later serves the existing memories at once; and Envoy keeps serving, and
/healthz stays 200, once its health check has marked a killed replica down.

The replicas listen on ports reserved up front, so a killed one is restarted on the same
port behind the same Envoy before the next test (each test starts with all three healthy)."""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import grpc
import pytest
from conftest import Rest, Stubs, free_port, make_config
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support.processes import wait_gone
from support.rpc_errors import error_info
from support.serve_process import ServeProcess
from support.vectors import GatedModels, gated, remote_settings, set_memory, status, wait_for  # noqa: F401

from memsvc.gateway.launcher import Gateway
from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import engine_pb2_grpc, memory_pb2_grpc, settings_pb2_grpc
from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import settings_pb2 as spb

pytestmark = pytest.mark.e2e
NAMES = ("a", "b", "c")
# The reindex holder's embedding call is held by the test until it releases it.
ENV = {"MEMSVC_EMBEDDING_TIMEOUT_S": "300"}
REINDEX_ROWS = 300  # the first batch embeds 128 of them, the second embedding call is held


@dataclass
class Replica:
    """One `memsvc serve --processes 1 --no-gateway` on a port of its own, restartable."""

    data_dir: Path
    port: int
    database_url: str
    process: ServeProcess | None = None
    channel: grpc.Channel | None = None

    def start(self) -> Replica:
        self.process = ServeProcess(
            self.data_dir,
            self.port,
            0,
            env_extra=ENV,
            extra_args=("--no-gateway", "--mcp-port", "-1", "--processes", "1", "--database-url", self.database_url),
        )
        assert self.process.wait_for("server.started")["grpc_port"] == self.port
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        health = health_pb2_grpc.HealthStub(self.channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.proc.poll() is None

    @property
    def stubs(self) -> Stubs:
        assert self.channel is not None
        return Stubs(
            memory_pb2_grpc.MemoryServiceStub(self.channel),
            engine_pb2_grpc.EngineServiceStub(self.channel),
            settings_pb2_grpc.SettingsServiceStub(self.channel),
        )

    def kill(self) -> None:
        """SIGKILL: no shutdown of any kind, as a crashed host. The channel stays open:
        clients keep calling the dead address (UNAVAILABLE) until the replica is restarted."""
        assert self.process is not None
        self.process.proc.send_signal(signal.SIGKILL)
        assert self.process.exit_code(30) == -signal.SIGKILL

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            wait_gone(self.process.proc.pid)
        self._close()

    def _close(self) -> None:
        if self.channel is not None:
            self.channel.close()
            self.channel = None


@dataclass
class Cluster:
    replicas: dict[str, Replica]
    gateway: Gateway
    rest: Rest
    extra: list[Replica] = field(default_factory=list)

    def healthy_ports(self) -> set[int]:
        """The replicas Envoy's active health check currently passes (its admin /clusters)."""
        code, body = self.gateway.admin("/clusters?format=json")
        assert code == 200, body
        clusters = json.loads(body)["cluster_statuses"]
        hosts = next(c for c in clusters if c["name"] == "memsvc_grpc")["host_statuses"]
        return {
            h["address"]["socket_address"]["port_value"]
            for h in hosts
            if h["health_status"].get("eds_health_status") == "HEALTHY"
            and not any(flag.startswith("failed") for flag in h["health_status"])
        }

    def wait_healthy(self, ports: set[int], check: Callable[[], None] = lambda: None, timeout_s: float = 60) -> None:
        """Until exactly `ports` pass Envoy's health check, calling `check` at every poll."""
        deadline = time.monotonic() + timeout_s
        while (seen := self.healthy_ports()) != ports:
            check()
            assert time.monotonic() < deadline, f"healthy replicas {seen}, wanted {ports}"
            time.sleep(0.1)

    def all_serving(self) -> None:
        """Restart any replica an earlier test killed; return once Envoy sends to all three."""
        for replica in self.replicas.values():
            if not replica.running:
                replica.stop()
                replica.start()
        self.wait_healthy({r.port for r in self.replicas.values()})

    def start_extra(self, name: str) -> Replica:
        """A replica outside Envoy's list, on the same database (stopped with the cluster)."""
        some = self.replicas["a"]
        self.extra.append(Replica(some.data_dir.parent / name, free_port(), some.database_url))
        return self.extra[-1].start()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, postgres_server) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("replicas")
    name = f"replicas_{uuid.uuid4().hex[:12]}"
    url = postgres_server.create_database(name)
    replicas = {n: Replica(root / f"replica-{n}", free_port(), url) for n in NAMES}
    gateway = None
    result = None
    try:
        for replica in replicas.values():
            replica.start()
        set_memory(replicas["a"].stubs, enabled=True)  # retrieval answers nothing while memory is disabled
        upstreams = tuple(("127.0.0.1", r.port) for r in replicas.values())
        conf = replace(make_config(root / "gateway"), rest_port=free_port())
        gateway = Gateway.for_config(conf, grpc_port=replicas["a"].port, replicas=upstreams)
        gateway.start()
        result = Cluster(replicas, gateway, Rest(f"http://127.0.0.1:{gateway.settings.listen_port}"))
        yield result
    finally:
        if gateway is not None:
            gateway.stop()
        for replica in [*replicas.values(), *(result.extra if result else [])]:
            replica.stop()
        postgres_server.drop_database(name)


@pytest.fixture
def three(cluster: Cluster) -> Cluster:
    cluster.all_serving()
    return cluster


def owner(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(replica: Replica, api_key_id: str, content: str) -> str:
    return replica.stubs.memory.CreateMemory(
        mpb.CreateMemoryRequest(api_key_id=api_key_id, content=content), timeout=10
    ).id


def listed_ids(replica: Replica, api_key_id: str) -> list[str]:
    reply = replica.stubs.memory.ListMemories(mpb.ListMemoriesRequest(api_key_id=api_key_id, limit=200), timeout=10)
    return [m.id for m in reply.data]


def retrieved_ids(replica: Replica, api_key_id: str, query: str) -> list[str]:
    reply = replica.stubs.engine.Retrieve(
        epb.RetrieveRequest(api_key_id=api_key_id, query=query, strategy="hybrid"), timeout=30
    )
    return [m.id for m in reply.memories]


# ---- 1. a write through one replica is read through the others at once ---------------------


def test_a_write_through_one_replica_is_read_through_the_others_and_every_envoy_answer(three: Cluster):
    a, b, c = three.replicas.values()
    who = owner("shared")
    made = create(a, who, "The lighthouse keeper feeds the gulls at dawn")
    for other in (b, c):
        assert other.stubs.memory.GetMemory(mpb.GetMemoryRequest(id=made), timeout=10).content.startswith(
            "The lighthouse keeper"
        )
        assert listed_ids(other, who) == [made]
        assert retrieved_ids(other, who, "lighthouse gulls") == [made]
    # Round robin: six rounds reach every replica at least once each; every answer sees it.
    for _ in range(2 * len(NAMES)):
        assert three.rest.call("GET", f"/api/memory/{made}")[1]["id"] == made
        code, listing = three.rest.call("GET", f"/api/memory?apiKeyId={who}")
        assert code == 200 and [m["id"] for m in listing["data"]] == [made], listing
        code, found = three.rest.call(
            "POST", "/api/memory/retrieve", {"apiKeyId": who, "query": "lighthouse", "strategy": "hybrid"}
        )
        assert code == 200 and [m["id"] for m in found["memories"]] == [made], found


# ---- 2. one reindex for the whole cluster --------------------------------------------------


@pytest.fixture
def remote_source(three: Cluster, gated: GatedModels) -> Iterator[GatedModels]:
    """The database's embedding settings pointed at the gated loopback model server for the
    test, and put back afterwards (settings are shared by every replica)."""
    stubs = three.replicas["a"].stubs
    before = stubs.settings.GetMemorySettings(spb.GetMemorySettingsRequest(), timeout=10)
    yield gated
    gated.release()
    set_memory(stubs, enabled=before.enabled, embeddingSource=before.embedding_source or "auto")


def test_a_reindex_through_one_replica_runs_once_and_is_refused_through_the_others(three: Cluster, remote_source):
    """The job's source is a loopback model server that holds its second embedding call until
    the test releases it, so the job is running while the others are asked, whatever the
    machine's speed (a fast local model could finish before they are)."""
    a, b, c = three.replicas.values()
    who = owner("reindex")
    batch = [
        mpb.CreateMemoryRequest(api_key_id=who, content=f"memory {i} about topic {i % 13}") for i in range(REINDEX_ROWS)
    ]
    assert all(
        r.success for r in a.stubs.memory.CreateMemories(mpb.CreateMemoriesRequest(memories=batch), timeout=60).results
    )
    set_memory(c.stubs, **remote_settings(remote_source))  # created without a source: all wait for a reindex

    running = a.stubs.engine.Reindex(epb.ReindexRequest(), timeout=120)
    pending = next(running).pending  # these rows and any other test's, all created without a source
    assert pending >= REINDEX_ROWS
    wait_for(lambda: remote_source.embed_calls == 2, 60, what="A's job held in its second embedding call")
    seen = wait_for(
        lambda: (s := status(b.stubs).reindex).progress.processed == 128 and s,
        30,
        what="A's first batch in B's engine status",
    )
    assert seen.running and seen.progress.state == "running" and seen.progress.pending == pending - 128
    assert seen.holder.startswith(f"{a.process.proc.pid}-")

    for other in (b, c):
        assert status(other.stubs).reindex.running
        with pytest.raises(grpc.RpcError) as refused:
            next(other.stubs.engine.Reindex(epb.ReindexRequest(), timeout=30))
        assert refused.value.code() is grpc.StatusCode.ABORTED
        assert error_info(refused.value).reason == "REINDEX_RUNNING"
    assert remote_source.embed_calls == 2  # neither B nor C started anything

    remote_source.release()
    rest = list(running)
    assert [m.state for m in rest].count("done") == 1 and rest[-1].state == "done"
    assert rest[-1].processed == pending and rest[-1].errors == 0
    for replica in (a, b, c):
        after = status(replica.stubs)
        assert not after.reindex.running and after.reindex.holder == ""
        assert (after.reindex.progress.state, after.reindex.progress.processed) == ("done", pending)
        assert after.vector_store.needs_reindex == 0


# ---- 3. SIGKILL during acknowledged writes -------------------------------------------------


class Writer:
    """CreateMemory round robin over the replicas on a thread, recording every acknowledged
    id (with the replica that acknowledged it) and every failure (replica, status code)."""

    def __init__(self, replicas: dict[str, Replica], api_key_id: str):
        self.stubs = {name: r.stubs.memory for name, r in replicas.items()}
        self.api_key_id = api_key_id
        self.acked: list[tuple[str, str]] = []
        self.failed: list[tuple[str, grpc.StatusCode]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        sent = 0
        while not self.stop.is_set():
            name = list(self.stubs)[sent % len(self.stubs)]
            request = mpb.CreateMemoryRequest(api_key_id=self.api_key_id, content=f"acknowledged write {sent}")
            try:
                self.acked.append((name, self.stubs[name].CreateMemory(request, timeout=10).id))
            except grpc.RpcError as err:
                self.failed.append((name, err.code()))
            sent += 1

    def count(self, name: str) -> int:
        return sum(1 for n, _ in list(self.acked) if n == name)


def test_a_replica_killed_during_acknowledged_writes_loses_none_and_the_others_keep_answering(three: Cluster):
    a, b, c = three.replicas.values()
    writer = Writer(three.replicas, owner("killed"))
    writer.thread.start()
    try:
        wait_for(lambda: writer.count("b") >= 10, 60, what="writes acknowledged by B")
        b.kill()
        at_kill = {name: writer.count(name) for name in ("a", "c")}
        failures_at_kill = len(writer.failed)
        wait_for(
            lambda: all(writer.count(n) >= at_kill[n] + 20 for n in at_kill) and len(writer.failed) > failures_at_kill,
            60,
            what="A and C answering after B was killed",
        )
    finally:
        writer.stop.set()
        writer.thread.join(30)
    assert {name for name, _ in writer.failed} == {"b"}
    assert {code for _, code in writer.failed} == {grpc.StatusCode.UNAVAILABLE}
    acked = [memory_id for _, memory_id in writer.acked]
    for survivor in (a, c):
        for memory_id in acked:
            assert survivor.stubs.memory.GetMemory(mpb.GetMemoryRequest(id=memory_id), timeout=10).id == memory_id
        total = survivor.stubs.memory.ListMemories(
            mpb.ListMemoriesRequest(api_key_id=writer.api_key_id), timeout=10
        ).total
        assert total >= len(acked)  # a write B committed but never answered may be there too


# ---- 4. a replica started later ------------------------------------------------------------


def test_a_replica_started_later_serves_the_existing_memories_at_once(three: Cluster):
    a = three.replicas["a"]
    who = owner("later")
    made = [create(a, who, f"the harbour ferry leaves at {hour} o'clock") for hour in (6, 7, 8)]
    late = three.start_extra("replica-d")  # returns once its health check says SERVING
    assert sorted(retrieved_ids(late, who, "harbour ferry")) == sorted(made)
    assert sorted(listed_ids(late, who)) == sorted(made)


# ---- 5. Envoy with one replica killed ------------------------------------------------------


def test_envoy_serves_and_healthz_stays_200_once_a_killed_replica_is_marked_down(three: Cluster):
    a, b, c = three.replicas.values()
    c.kill()

    def probe_serving() -> None:
        assert three.rest.call("GET", "/healthz") == (200, {"status": "SERVING"})

    three.wait_healthy({a.port, b.port}, check=probe_serving)
    who = owner("degraded")
    made = []
    for i in range(4 * len(NAMES)):
        code, body = three.rest.call("POST", "/api/memory", {"apiKeyId": who, "content": f"while C is down {i}"})
        assert code == 200, (i, body)
        made.append(body["id"])
        probe_serving()
    for memory_id in made:
        assert three.rest.call("GET", f"/api/memory/{memory_id}")[0] == 200
    assert sorted(listed_ids(a, who)) == sorted(made)
