"""Durability of acknowledged writes across a crash (SIGKILL) and a graceful stop (SIGTERM).

The server runs as a real subprocess (`python -m memsvc serve --no-gateway`), exactly as an
operator starts it; its port comes from the `server.started` JSON log line on stderr.
Writers record every CreateMemory the server acknowledged; the server is killed while
writes are still in flight, restarted on the same data dir, and then:

* every acknowledged id is there, with exactly the content, key and metadata that were sent;
* every row that exists (acknowledged or not: a write may commit just before the kill and
  never be acknowledged) is one that was sent, whole: no half-written rows;
* the file passes `PRAGMA integrity_check` and FTS5's own integrity check (opened directly
  with apsw), and the keyword index finds every acknowledged row.

Each content is distinct, keyed by its request, a few hundred bytes to ~20 KB (UTF-8, so rows
span several pages), with a SHA-256 of it in the metadata.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import apsw
import grpc
import pytest
from google.protobuf import json_format, struct_pb2

from memsvc.v1 import memory_pb2 as pb
from memsvc.v1 import memory_pb2_grpc

START_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 10.0
GRACE_S = 5.0
ACKS_BEFORE_SIGNAL = 300
OWNER = "durability"
# Rows of up to ~20 KB: a page of 200 is larger than gRPC's default 4 MiB receive limit.
CLIENT_OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]


# ---- the server subprocess -------------------------------------------------------------------


@dataclass
class ServerProcess:
    proc: subprocess.Popen
    data_dir: Path
    lines: list[str] = field(default_factory=list)
    port: int | None = None
    started: threading.Event = field(default_factory=threading.Event)
    reader: threading.Thread | None = None

    def events(self) -> list[dict]:
        out = []
        for line in list(self.lines):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def stderr_tail(self, n: int = 30) -> str:
        return "\n".join(self.lines[-n:])

    def channel(self) -> grpc.Channel:
        return grpc.insecure_channel(f"127.0.0.1:{self.port}", options=CLIENT_OPTIONS)


def _server_env() -> dict[str, str]:
    # Only what this test decides: no tokens, INFO (for server.started), a short grace.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSVC_")}
    # No metrics or MCP listener: their fixed default ports may be held by another process,
    # and this test fails on any error line.
    # One process: the SIGKILL must hit the process that holds the writes. With several, it
    # would hit the parent, and its workers drain gracefully (they are told by the kernel when
    # the parent dies), which is the shutdown path, not a crash.
    env.update(
        MEMSVC_LOG_LEVEL="INFO",
        MEMSVC_SHUTDOWN_GRACE_S=str(GRACE_S),
        PYTHONUNBUFFERED="1",
        MEMSVC_METRICS_PORT="-1",
        MEMSVC_MCP_PORT="-1",
        MEMSVC_PROCESSES="1",
    )
    return env


def _drain(server: ServerProcess) -> None:
    """Reads stderr to EOF for the whole life of the process (a full pipe would block the
    server's logging), noting the port from the server.started line."""
    assert server.proc.stderr is not None
    for raw in server.proc.stderr:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        server.lines.append(line)
        if not server.started.is_set():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("event") == "server.started":
                server.port = int(entry["grpc_port"])
                server.started.set()


class Servers:
    """Starts memsvc subprocesses; whatever is still running at teardown is killed."""

    def __init__(self) -> None:
        self.all: list[ServerProcess] = []

    def start(self, data_dir: Path) -> ServerProcess:
        cmd = [sys.executable, "-m", "memsvc", "serve", "--no-gateway", "--grpc-port", "0", "--data-dir", str(data_dir)]
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_server_env()
        )
        server = ServerProcess(proc, data_dir)
        self.all.append(server)
        server.reader = threading.Thread(target=_drain, args=(server,), name="memsvc-stderr", daemon=True)
        server.reader.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started.wait(0.05):
            if proc.poll() is not None:
                server.reader.join(5)
                pytest.fail(f"memsvc exited with {proc.returncode} before server.started:\n{server.stderr_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no server.started line within {START_TIMEOUT_S}s:\n{server.stderr_tail()}")
        return server

    def cleanup(self) -> None:
        for server in self.all:
            if server.proc.poll() is None:
                server.proc.kill()
            try:
                server.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
            if server.reader is not None:
                server.reader.join(5)


@pytest.fixture
def servers() -> Iterator[Servers]:
    s = Servers()
    try:
        yield s
    finally:
        s.cleanup()


# ---- writers ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    key: str
    content: str
    metadata: dict


_ALPHABET = "abcdefghijklmnopqrstuvwxyz      0123456789éüßøñçЖжλπ中文字日本語🧠✓\t\n"


def make_request(key: str) -> Sent:
    rnd = random.Random(key)
    n = rnd.choice([40, 700, 3000, 6000])
    body = "".join(rnd.choices(_ALPHABET, k=n))
    # The token lets the FTS index be probed per row; the rest makes the size vary.
    content = f"tok{key.replace('-', 'x')} {key} {n} {body}"
    metadata = {"key": key, "chars": len(content), "sha256": hashlib.sha256(content.encode("utf-8")).hexdigest()}
    return Sent(key, content, metadata)


class Writers:
    """`threads` clients, each sending CreateMemory back to back until its first error."""

    def __init__(self, port: int, threads: int, prefix: str) -> None:
        self.port = port
        self.prefix = prefix
        self.lock = threading.Lock()
        self.sent: dict[str, Sent] = {}
        self.acked: dict[str, Sent] = {}  # memory id -> what was sent
        self.failures: list[grpc.StatusCode] = []
        self.in_flight = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(t,), daemon=True) for t in range(threads)]

    def start(self) -> Writers:
        for t in self.threads:
            t.start()
        return self

    def _run(self, t: int) -> None:
        channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        try:
            i = 0
            while not self.stop.is_set():
                sent = make_request(f"{self.prefix}-{t}-{i}")
                metadata = struct_pb2.Struct()
                metadata.update(sent.metadata)
                with self.lock:
                    self.sent[sent.key] = sent
                    self.in_flight += 1
                try:
                    response = stub.CreateMemory(
                        pb.CreateMemoryRequest(api_key_id=OWNER, key=sent.key, content=sent.content, metadata=metadata),
                        timeout=CALL_TIMEOUT_S,
                    )
                except grpc.RpcError as err:
                    with self.lock:
                        self.in_flight -= 1
                        self.failures.append(err.code())
                    return
                with self.lock:
                    self.in_flight -= 1
                    self.acked[response.id] = sent
                assert response.created, f"{sent.key} was an update, expected a new row"
                i += 1
        finally:
            channel.close()

    def wait_for_acks(self, n: int, timeout: float = 60.0) -> None:
        """Returns once `n` writes are acknowledged and a call is in flight, holding the lock
        so that the caller's signal lands while that call is outstanding."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.lock.acquire()
            if self.failures:
                self.lock.release()
                pytest.fail(f"a write failed before any signal: {self.failures}")
            acked, in_flight = len(self.acked), self.in_flight
            if acked >= n and in_flight > 0:
                return
            self.lock.release()
            time.sleep(0.0002 if acked >= n else 0.005)
        pytest.fail(f"only {len(self.acked)} of {n} acknowledgements within {timeout}s")

    def join(self, stop: bool = False) -> None:
        """Waits for every writer to end. Against a dead server each ends on its own at its
        first failed call; `stop` also ends them against a live one."""
        if stop:
            self.stop.set()
        for t in self.threads:
            t.join(CALL_TIMEOUT_S + 5)
            assert not t.is_alive(), "a writer thread hung"


# ---- verification ----------------------------------------------------------------------------


def list_all(server: ServerProcess) -> dict[str, pb.Memory]:
    """Every memory of OWNER, through ListMemories pages of 200."""
    channel = server.channel()
    try:
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        rows: dict[str, pb.Memory] = {}
        page = 1
        while True:
            response = stub.ListMemories(
                pb.ListMemoriesRequest(api_key_id=OWNER, limit=200, page=page), timeout=CALL_TIMEOUT_S
            )
            for memory in response.data:
                assert memory.id not in rows, f"{memory.id} listed twice"
                rows[memory.id] = memory
            if page >= response.total_pages:
                assert len(rows) == response.total, (len(rows), response.total)
                return rows
            page += 1
    finally:
        channel.close()


def assert_rows_intact(rows: dict[str, pb.Memory], sent: dict[str, Sent], acked: dict[str, Sent]) -> None:
    lost = sorted(acked.keys() - rows.keys())
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged writes lost, e.g. {lost[:5]}"
    for memory_id, memory in rows.items():
        assert memory.HasField("key") and memory.key in sent, f"row {memory_id} has a key nobody sent: {memory.key!r}"
        expected = sent[memory.key]
        if memory_id in acked:
            assert acked[memory_id].key == memory.key, f"acknowledged id {memory_id} now holds {memory.key!r}"
        assert memory.content == expected.content, (
            f"row {memory_id} ({memory.key}) is not what was sent: {len(memory.content)} chars stored, "
            f"{len(expected.content)} sent"
        )
        assert json_format.MessageToDict(memory.metadata) == expected.metadata, f"row {memory_id}: metadata differs"
        assert memory.api_key_id == OWNER and memory.type == "factual"
    assert len(rows) <= len(sent)


def assert_database_file_ok(db_path: Path, acked: dict[str, Sent]) -> None:
    """Open the file directly (not through memsvc) and let SQLite and FTS5 judge it."""
    conn = apsw.Connection(str(db_path))
    try:
        conn.set_busy_timeout(10_000)
        try:  # vec0 tables, if a later migration adds them, need the extension to be checked
            import sqlite_vec

            conn.enable_load_extension(True)
            conn.load_extension(sqlite_vec.loadable_path())
            conn.enable_load_extension(False)
        except Exception:  # noqa: BLE001 - the checks below still apply without it
            pass
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        # FTS5's check raises apsw.CorruptError when it fails. The plain form checks the
        # index's own structure only; rank = 1 also compares it with the external content
        # table (memories), which is what catches an index out of step with the rows.
        conn.execute("INSERT INTO memory_fts(memory_fts) VALUES('integrity-check')")
        conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES('integrity-check', 1)")
        # And the index actually finds each acknowledged row by its unique token.
        for memory_id, sent in acked.items():
            token = "tok" + sent.key.replace("-", "x")
            found = conn.execute(
                "SELECT m.id FROM memory_fts JOIN memories m ON m.memory_id = memory_fts.rowid "
                "WHERE memory_fts MATCH ?",
                (token,),
            ).fetchall()
            assert found == [(memory_id,)], f"FTS lookup of {token} gave {found}"
    finally:
        conn.close()


def wait_exit(server: ServerProcess, timeout: float) -> int:
    try:
        return server.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"memsvc did not exit within {timeout}s:\n{server.stderr_tail()}")


# ---- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [1, 8], ids=["sequential", "8-threads"])
def test_acknowledged_writes_survive_sigkill(servers: Servers, tmp_path: Path, threads: int):
    data_dir = tmp_path / "data"
    sent: dict[str, Sent] = {}
    acked: dict[str, Sent] = {}
    # Two crash cycles: recovery must also work on a file that was itself recovered.
    for cycle in range(2):
        server = servers.start(data_dir)
        writers = Writers(server.port, threads, prefix=f"c{cycle}").start()
        try:
            writers.wait_for_acks(ACKS_BEFORE_SIGNAL)
            try:  # with at least one CreateMemory outstanding
                in_flight = writers.in_flight
                server.proc.send_signal(signal.SIGKILL)
            finally:
                writers.lock.release()
            assert in_flight >= 1
            assert wait_exit(server, 10) == -signal.SIGKILL
            writers.join()
        finally:
            writers.join(stop=True)
        # Every writer was cut off by the kill: each one's last call failed.
        assert len(writers.failures) == threads, writers.failures
        sent.update(writers.sent)
        acked.update(writers.acked)
        assert len(writers.acked) >= ACKS_BEFORE_SIGNAL

    server = servers.start(data_dir)
    rows = list_all(server)
    assert_rows_intact(rows, sent, acked)
    # Spot-check GetMemory too (a different read path from ListMemories).
    channel = server.channel()
    try:
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        for memory_id in random.Random(0).sample(sorted(acked), 25):
            assert (
                stub.GetMemory(pb.GetMemoryRequest(id=memory_id), timeout=CALL_TIMEOUT_S).content
                == acked[memory_id].content
            )
        health = stub.CheckHealth(pb.CheckHealthRequest(), timeout=CALL_TIMEOUT_S)
        assert health.working, health.error
    finally:
        channel.close()
    assert_database_file_ok(data_dir / "memsvc.db", acked)


def test_sigterm_exits_cleanly_and_keeps_writes(servers: Servers, tmp_path: Path):
    data_dir = tmp_path / "data"
    server = servers.start(data_dir)
    writers = Writers(server.port, 8, prefix="term").start()
    try:
        writers.wait_for_acks(ACKS_BEFORE_SIGNAL)
        try:  # with at least one CreateMemory outstanding
            signalled = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
        finally:
            writers.lock.release()
        code = wait_exit(server, GRACE_S + 15)
        elapsed = time.monotonic() - signalled
        writers.join()
    finally:
        writers.join(stop=True)
    server.reader.join(5)
    assert code == 0, f"exit code {code}:\n{server.stderr_tail()}"
    assert elapsed <= GRACE_S, f"took {elapsed:.1f}s to stop, grace is {GRACE_S}s"
    events = [e.get("event") for e in server.events()]
    assert "server.stopping" in events and "server.stopped" in events, events[-5:]
    assert not [e for e in server.events() if e.get("level") in ("error", "critical")], server.stderr_tail()
    # Calls that reach a draining server are refused by gRPC itself: UNAVAILABLE, or
    # CANCELLED for a stream that raced the GOAWAY (measured: those never reach memsvc).
    assert set(writers.failures) <= {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}, writers.failures
    # Every RPC memsvc did start was allowed to finish and was acknowledged: one "rpc" log
    # line per handled call, all OK, exactly as many as the clients saw succeed.
    handled = Counter(e.get("code") for e in server.events() if e.get("event") == "rpc")
    assert handled == Counter({"OK": len(writers.acked)}), (handled, len(writers.acked))

    restarted = servers.start(data_dir)
    rows = list_all(restarted)
    assert_rows_intact(rows, writers.sent, writers.acked)
    # A clean stop leaves nothing half-done: every row that exists was acknowledged, except
    # at most the calls that were in flight when the listener closed (one per writer).
    assert len(rows) - len(writers.acked) <= len(writers.threads)
    assert_database_file_ok(data_dir / "memsvc.db", writers.acked)
    restarted.proc.send_signal(signal.SIGTERM)
    assert wait_exit(restarted, GRACE_S + 15) == 0
