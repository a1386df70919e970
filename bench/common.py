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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
CACHE = BENCH / ".cache"
RESULTS = BENCH / "results"
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
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


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
        return [self.name, f"{self.value:.3g}{self.unit}", f"{self.op} {self.limit:g}{self.unit}",
                "PASS" if self.passed else "MISS", self.note]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "op": self.op, "limit": self.limit, "unit": self.unit,
                "passed": self.passed, "note": self.note}


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


def server_env(data_dir: Path, grpc_port: int, *, gateway: bool = False, rest_port: int = 0,
               admin_port: int = 0, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSVC_", "MEMORY_"))}
    env.update({
        "MEMSVC_DATA_DIR": str(data_dir), "MEMSVC_GRPC_PORT": str(grpc_port), "MEMSVC_LOG_LEVEL": "WARNING",
        "MEMSVC_GATEWAY": "true" if gateway else "false", "MEMORY_STATIC_CACHE_DIR": str(STATIC_CACHE),
        "PYTHONUNBUFFERED": "1",
    })
    if gateway:
        env.update({"MEMSVC_REST_PORT": str(rest_port), "MEMSVC_ENVOY_ADMIN_PORT": str(admin_port)})
    env.update(extra or {})
    return env


@dataclass
class ServerProc:
    """`memsvc serve` in a subprocess (its own interpreter: the bench's client threads must
    not share the server's GIL)."""

    data_dir: Path
    gateway: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    rest_port: int = 0
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    log_path: Path | None = None

    def start(self, timeout_s: float = 60.0) -> "ServerProc":
        self.port = free_port()
        self.rest_port = free_port() if self.gateway else 0
        admin = free_port() if self.gateway else 0
        env = server_env(self.data_dir, self.port, gateway=self.gateway, rest_port=self.rest_port,
                         admin_port=admin, extra=self.extra_env)
        self.log_path = self.data_dir.parent / "server.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.started_at = time.perf_counter()
        self.proc = subprocess.Popen([PY, "-m", "memsvc", "serve"], env=env, stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL, cwd=str(ROOT))
        wait_serving(self.port, timeout_s, self.proc)
        if self.gateway:
            wait_http(self.rest_port, timeout_s)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> "ServerProc":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def health_status(port: int, timeout_s: float = 0.5) -> int | None:
    """The overall gRPC health status (1 = SERVING), None when not reachable."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        try:
            return health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""),
                                                        timeout=timeout_s).status
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


def wait_http(port: int, timeout_s: float) -> None:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


class Stubs:
    def __init__(self, port: int):
        import grpc

        from memsvc.v1 import engine_pb2_grpc, memory_pb2_grpc, settings_pb2_grpc

        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.memory = memory_pb2_grpc.MemoryServiceStub(self.channel)
        self.engine = engine_pb2_grpc.EngineServiceStub(self.channel)
        self.settings = settings_pb2_grpc.SettingsServiceStub(self.channel)

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

    body = {"settings": {"enabled": True, "staticEnabled": True, "embeddingSource": "static",
                         "strategy": "hybrid", "retentionDays": 365, **extra}}
    req = json_format.ParseDict(body, settings_pb2.UpdateMemorySettingsRequest())
    stubs.settings.UpdateMemorySettings(req)
