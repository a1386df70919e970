"""Shared helpers of the benchmarks: paths, statistics, result files, a memsvc server in a
subprocess, gRPC stubs.

Rules every script follows (DESIGN.md "Speed is proven by bench/ scripts"): loopback only,
bounded loops, no asserts on timings, every figure beside a baseline measured in the same
run, medians over repeated rounds with min/max.
"""

from __future__ import annotations

import json
import math
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
CACHE = BENCH / ".cache"
# BENCH_RESULTS points a trial run (small sizes) somewhere else, so it never overwrites the
# committed results.
RESULTS = Path(os.environ.get("BENCH_RESULTS") or BENCH / "results")
# One static-model cache for every bench run: the distillation from MiniLM takes minutes once.
STATIC_CACHE = CACHE / "embeddings"
PY = sys.executable

if str(ROOT) not in sys.path:  # `python bench/x.py` from anywhere
    sys.path.insert(0, str(ROOT))


# ------------------------------------------------------------------------------- statistics


def pct(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of unsorted values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def agg(rounds: Sequence[float]) -> dict[str, float]:
    """Median of repeated rounds with min and max."""
    values = [float(v) for v in rounds]
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "rounds": len(values)}


def fmt(a: dict[str, float], digits: int = 2, unit: str = "") -> str:
    """`median (min–max)`."""
    f = f"{{:.{digits}f}}"
    return f"{f.format(a['median'])}{unit} ({f.format(a['min'])}–{f.format(a['max'])})"


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def write_results(name: str, data: dict[str, Any], table: str, title: str) -> Path:
    """bench/results/<name>.json and <name>.md; prints the table."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    data = {"bench": name, "machine": machine(), **data}
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    text = f"### {title}\n\n{table}\n"
    (RESULTS / f"{name}.md").write_text(text, encoding="utf-8")
    print(text, flush=True)
    return RESULTS / f"{name}.json"


@dataclass
class Target:
    """One performance target: `value` measured against `limit` (`op` is <= or >=)."""

    name: str
    value: float
    op: str
    limit: float
    unit: str = ""
    note: str = ""

    @property
    def passed(self) -> bool:
        if self.value is None or (isinstance(self.value, float) and math.isnan(self.value)):
            return False
        return self.value <= self.limit if self.op == "<=" else self.value >= self.limit

    def row(self) -> list[str]:
        return [
            self.name,
            f"{self.value:.3g}{self.unit}",
            f"{self.op} {self.limit:g}{self.unit}",
            "PASS" if self.passed else "MISS",
            self.note,
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "op": self.op,
            "limit": self.limit,
            "unit": self.unit,
            "passed": self.passed,
            "note": self.note,
        }


def targets_table(targets: Sequence[Target]) -> str:
    return md_table(["target", "measured", "goal", "", "note"], [t.row() for t in targets])


# ------------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    """Resident set size of a process from /proc (VmRSS), in MB (10^6 bytes)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    return float("nan")


def server_env(
    data_dir: Path,
    grpc_port: int,
    *,
    gateway: bool = False,
    rest_port: int = 0,
    admin_port: int = 0,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSVC_", "MEMORY_"))}
    env.update(
        {
            "MEMSVC_DATA_DIR": str(data_dir),
            "MEMSVC_GRPC_PORT": str(grpc_port),
            "MEMSVC_LOG_LEVEL": "WARNING",
            "MEMSVC_GATEWAY": "true" if gateway else "false",
            "MEMORY_STATIC_CACHE_DIR": str(STATIC_CACHE),
            "PYTHONUNBUFFERED": "1",
        }
    )
    if gateway:
        env.update({"MEMSVC_REST_PORT": str(rest_port), "MEMSVC_ENVOY_ADMIN_PORT": str(admin_port)})
    env.update(extra or {})
    return env


def baseline_tree(commit: str, dest: Path) -> Path:
    """`commit`'s source tree under `dest`, servable by `ServerProc(root=...)` beside the
    working tree's, so a bench measures before and after in one run on the same machine
    state. The editable install maps `memsvc.v1` and `memsvc.migrations` to this checkout's
    folders; links inside the copied package make the copy find its own first."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    for link, target in (("v1", "../gen/memsvc/v1"), ("migrations", "../migrations")):
        (dest / "memsvc" / link).symlink_to(target)
    return dest


@dataclass
class ServerProc:
    """`memsvc serve` in a subprocess (its own interpreter: the bench's client threads must
    not share the server's GIL)."""

    data_dir: Path
    gateway: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)
    #: Server processes (MEMSVC_PROCESSES); None leaves it unset: the server's default.
    processes: int | None = None
    port: int = 0
    rest_port: int = 0
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    log_path: Path | None = None
    #: The source tree served (`python -m memsvc` from there): another commit's, for a
    #: before/after comparison in one run (see `baseline_tree`).
    root: Path = ROOT

    def start(self, timeout_s: float = 60.0) -> ServerProc:
        self.port = free_port()
        self.rest_port = free_port() if self.gateway else 0
        admin = free_port() if self.gateway else 0
        extra = dict(self.extra_env)
        if self.processes is not None:
            extra["MEMSVC_PROCESSES"] = str(self.processes)
        env = server_env(
            self.data_dir, self.port, gateway=self.gateway, rest_port=self.rest_port, admin_port=admin, extra=extra
        )
        self.log_path = self.data_dir.parent / "server.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.started_at = time.perf_counter()
        # Its own process group: workers and Envoy that outlive a killed parent are ended too.
        self.proc = subprocess.Popen(
            [PY, "-m", "memsvc", "serve"],
            env=env,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            cwd=str(self.root),
            start_new_session=True,
        )
        wait_serving(self.port, timeout_s, self.proc)
        wait_listening(self.port, self.expected_processes(), timeout_s, self.proc)
        if self.gateway:
            wait_http(self.rest_port, timeout_s)
        return self

    def expected_processes(self) -> int:
        """How many processes should serve the port: the asked count, else the server's
        default (the usable cores) when it knows the option, else one."""
        if self.processes is not None:
            return self.processes
        if "MEMSVC_PROCESSES" in self.extra_env:
            return int(self.extra_env["MEMSVC_PROCESSES"])
        return len(os.sched_getaffinity(0)) if processes_option() else 1

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        try:  # whatever of the group is left once the server has gone (nothing, normally)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self) -> ServerProc:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def health_status(port: int, timeout_s: float = 0.5) -> int | None:
    """The overall gRPC health status (1 = SERVING), None when not reachable."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        try:
            return (
                health_pb2_grpc.HealthStub(ch)
                .Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
                .status
            )
        except grpc.RpcError:
            return None


def wait_serving(port: int, timeout_s: float, proc: subprocess.Popen | None = None, poll_s: float = 0.01) -> float:
    """Seconds until the health check answers SERVING (bounded by timeout_s)."""
    started = time.perf_counter()
    deadline = started + timeout_s
    while time.perf_counter() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before serving")
        if health_status(port) == 1:
            return time.perf_counter() - started
        time.sleep(poll_s)
    raise TimeoutError(f"no SERVING health answer on port {port} within {timeout_s} s")


def wait_listening(port: int, processes: int, timeout_s: float, proc: subprocess.Popen | None = None) -> int:
    """Until `processes` sockets listen on the port (the first worker answers health checks
    before the others have bound it) or the timeout passes; how many listen then."""
    deadline = time.perf_counter() + timeout_s
    while (found := listening_sockets(port)) < processes and time.perf_counter() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before serving")
        time.sleep(0.05)
    return found


def wait_http(port: int, timeout_s: float) -> None:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


# Each channel its own TCP connection: gRPC otherwise shares one connection among channels
# to the same address, so "16 clients" would be one connection, served by one process of a
# server that runs several on one port (SO_REUSEPORT balances connections, not calls).
CHANNEL_OPTIONS = [("grpc.use_local_subchannel_pool", 1)]

# Bench servers run beside the team's: no fixed MCP or metrics port to collide on.
QUIET_PORTS = {"MEMSVC_MCP_PORT": "-1", "MEMSVC_METRICS_PORT": "0"}


def channel(port: int):
    import grpc

    return grpc.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS)


def aio_channel(port: int):
    import grpc

    return grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS)


class Stubs:
    def __init__(self, port: int):
        from memsvc.v1 import engine_pb2_grpc, memory_pb2_grpc, settings_pb2_grpc

        self.channel = channel(port)
        self.memory = memory_pb2_grpc.MemoryServiceStub(self.channel)
        self.engine = engine_pb2_grpc.EngineServiceStub(self.channel)
        self.settings = settings_pb2_grpc.SettingsServiceStub(self.channel)
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        self._health = health_pb2_grpc.HealthStub(self.channel)
        self._health_request = health_pb2.HealthCheckRequest()

    def health(self, _: Any = None) -> Any:
        """One gRPC health check: a round trip that does no work of ours (the transport floor)."""
        return self._health.Check(self._health_request)

    def close(self) -> None:
        self.channel.close()


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    """n calls of fn, each timed in milliseconds."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def enable_static(stubs: Stubs, **extra: Any) -> None:
    from google.protobuf import json_format

    from memsvc.v1 import settings_pb2

    body = {
        "settings": {
            "enabled": True,
            "staticEnabled": True,
            "embeddingSource": "static",
            "strategy": "hybrid",
            "retentionDays": 365,
            **extra,
        }
    }
    req = json_format.ParseDict(body, settings_pb2.UpdateMemorySettingsRequest())
    stubs.settings.UpdateMemorySettings(req)


def interleaved_n(legs: dict[str, tuple[Callable[[Any], Any], Sequence[Any]]], rounds: int) -> dict[str, dict]:
    """Several ways of making comparable calls, alternating call by call (leg after leg for
    item 0, then for item 1, ...), so the noise of this shared machine hits every leg alike.
    Per leg: p50 and p99 of each round, as median (min–max) over the rounds."""
    names = list(legs)
    n = min(len(items) for _, items in legs.values())
    per: dict[str, dict[str, list[float]]] = {k: {"p50": [], "p99": []} for k in names}
    for _ in range(rounds):
        times: dict[str, list[float]] = {k: [] for k in names}
        for i in range(n):
            for k in names:
                fn, items = legs[k]
                t0 = time.perf_counter()
                fn(items[i])
                times[k].append((time.perf_counter() - t0) * 1000.0)
        for k in names:
            per[k]["p50"].append(pct(times[k], 50))
            per[k]["p99"].append(pct(times[k], 99))
    return {
        k: {
            "p50_ms": agg(per[k]["p50"]),
            "p99_ms": agg(per[k]["p99"]),
            "p50_rounds": per[k]["p50"],
            "calls_per_round": n,
        }
        for k in names
    }


# ------------------------------------------------------------------------------- server processes


def processes_option() -> bool:
    """Whether this memsvc knows MEMSVC_PROCESSES (several server processes on one port)."""
    from dataclasses import fields as dc_fields

    from memsvc.config import Config

    return any(f.metadata.get("env") == "MEMSVC_PROCESSES" for f in dc_fields(Config))


def listening_sockets(port: int) -> int:
    """TCP sockets listening on `port` (each SO_REUSEPORT worker binds its own)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 3 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def server_pids(root_pid: int) -> list[int]:
    """The server process and its descendants, Envoy not counted (the parent of several
    workers counts too, and any helper process it spawned)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            parents[int(stat.parent.name)] = int(text.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    tree, frontier = {root_pid}, [root_pid]
    while frontier:
        pid = frontier.pop()
        children = [c for c, p in parents.items() if p == pid and c not in tree]
        tree.update(children)
        frontier.extend(children)

    def is_envoy(pid: int) -> bool:
        try:
            return b"envoy" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except OSError:
            return True  # gone

    return sorted(pid for pid in tree if not is_envoy(pid))


def process_tree(root_pid: int) -> int:
    """How many processes `server_pids` finds."""
    return len(server_pids(root_pid))


def tree_rss_mb(root_pid: int) -> float:
    """Resident memory of the server and all its processes together (`server_pids`)."""
    return sum(rss_mb(pid) for pid in server_pids(root_pid))


def server_shape(server: ServerProc) -> dict[str, Any]:
    """Which process count a server runs with: what it was asked, and how many processes
    serve its port (listening sockets: each worker binds its own)."""
    asked = server.processes if server.processes is not None else server.extra_env.get("MEMSVC_PROCESSES")
    return {
        "MEMSVC_PROCESSES": "unset" if asked is None else str(asked),
        "option_known": processes_option(),
        "cores": os.cpu_count(),
        "serving_processes": listening_sockets(server.port),
        "process_tree": process_tree(server.pid),
    }


# ------------------------------------------------------------------------------- PostgreSQL


@contextmanager
def postgres() -> Iterator[Any]:
    """A PostgreSQL 16 + pgvector of the bench's own (tests/support/postgres.py: the dev
    extra's binaries on a free loopback port, fsync off as in the tests), stopped and removed
    when the block ends."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from support.postgres import running_postgres

    with running_postgres() as server:
        yield server


# ------------------------------------------------------------------------------- in-process engine


def one_blas_thread() -> None:
    """As `memsvc serve` does: one BLAS thread per NumPy call, so the in-process floor runs
    its vector scan the way the server does. NumPy is imported first: threadpoolctl limits
    only the BLAS libraries already loaded."""
    import numpy  # noqa: F401
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def open_reader_app(data_dir: Path, scratch: Path) -> Any:
    """memsvc's App on the same data dir a running server serves (WAL: both read), made not
    to write: settings are already stored; the character-memory files go to `scratch`; the
    access recorder keeps its request-path cost (it is called as in the server, with the
    server's delay) but its once-per-delay background UPDATE is a no-op. `database.commits`
    counts what it wrote nonetheless (reported)."""
    from memsvc.app import App
    from memsvc.config import Config
    from memsvc.core.access import AccessRecorder

    config = Config(
        data_dir=data_dir,
        memory_dir=scratch / "memory",
        static_cache_dir=STATIC_CACHE,
        gateway=False,
        metrics_port=-1,
        mcp_port=-1,
        reflection_sweep_s=86400.0,
    )
    one_blas_thread()
    app = App.open(config)
    if hasattr(app.engine, "access"):
        app.engine.access = AccessRecorder(lambda batch: None, app.background, config.access_flush_s)
    return app


def warm_engine(engine: Any, owner: str, queries: Sequence[str], timeout_s: float = 120.0) -> float | None:
    """Until the in-process engine retrieves hybrid (the static model loads lazily) and the
    owner's vectors are cached; seconds until hybrid, None if it never came."""
    started = time.perf_counter()
    ready = None
    while time.perf_counter() - started < timeout_s:
        r = engine.retrieve(owner, queries[0], strategy="hybrid", max_tokens=500)
        if r.resolution.strategy_used.startswith("hybrid") and not r.resolution.fallback_reason:
            ready = time.perf_counter() - started
            break
        time.sleep(0.05)
    for q in queries[:20]:
        engine.retrieve(owner, q, strategy="hybrid", max_tokens=500)
    return ready
