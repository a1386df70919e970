"""Several gRPC server processes on one port: `memsvc serve` with MEMSVC_PROCESSES > 1.

One Python process serves one core (the GIL), so `serve` runs a parent that supervises
worker processes, each a complete gRPC server (its own App, database connections, caches,
background writers and health servicer) bound to the same port with SO_REUSEPORT; the
kernel spreads connections over them.

What runs once, in the parent: the migrations of the configured store, SQLite or the
shared PostgreSQL (before any worker starts), the Envoy
gateway, the MCP HTTP server and /metrics (every worker's counters and histograms summed,
through prometheus_client's multiprocess files, in a folder of the run's own off the data
disk, see memsvc.metrics). The parent reserves the port first: it
checks that no other program holds it, then keeps it bound (not listening) with
SO_REUSEPORT, so port 0 picks one port that every worker then binds.

Workers are fresh interpreters (`python -m memsvc serve --worker-of <parent pid>`), never a
fork of a process running gRPC threads. Each:
- dies with the parent however it dies: it asks the kernel for SIGTERM when the parent goes
  (Linux PR_SET_PDEATHSIG), so even a parent killed with -9 leaves workers that drain and exit;
- runs in its own process group: a Ctrl-C reaches the parent, which stops workers in order;
- is restarted with backoff when it dies, a bounded number of times (memsvc.supervision);
- is told by signal when REST goes down or comes back, so its health says what the
  single-process server's says.

Qdrant's local mode locks its folder for one process, so several processes never use it:
with local Qdrant already enabled in the stored settings, `serve` runs one process and logs
why (setting a local path while several processes serve is refused). With a shared
PostgreSQL store local mode is refused at start instead: replicas on other hosts could not
share the folder, so one process would not help.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsvc.config import Config, ConfigError, to_env
from memsvc.supervision import Supervisor

if TYPE_CHECKING:
    from memsvc.metrics import ProcessesMetrics

log = logging.getLogger("memsvc.processes")
PR_SET_PDEATHSIG = 1
READY_TIMEOUT_S = 120.0  # a worker opens its App (models included) before it is ready


class WorkerError(RuntimeError):
    """A server process could not start, or kept exiting."""


def reserve_port(host: str, port: int) -> list[socket.socket]:
    """Bound, not listening, SO_REUSEPORT sockets that keep host:port for the workers (port 0
    picks a free one). A port another program holds is refused: the probe binds without
    SO_REUSEPORT, which fails on any holder, so no other server silently shares the port.

    Both binds allow what a server that just died leaves behind: its connections linger in
    TIME_WAIT for a minute, and a supervisor restarting memsvc must get a serving process at
    once, not "Address already in use" for that minute. The probe sets SO_REUSEADDR (as
    gRPC's own bind does), which still fails on a listener and on another memsvc's
    reservation. The reservation binds with SO_REUSEPORT alone, which TIME_WAIT connections
    of earlier workers (SO_REUSEPORT too) allow; those of a one-process server have no
    SO_REUSEPORT, and then it binds with SO_REUSEADDR as well."""
    chosen = port
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in _addresses(host, port):
            where = (address[0], chosen, *address[2:])
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(where)
                chosen = probe.getsockname()[1]
                where = (address[0], chosen, *address[2:])
            sockets.append(_reservation(family, kind, proto, where))
    except OSError as exc:
        for reserved in sockets:
            reserved.close()
        raise ConfigError(f"cannot bind gRPC to {host}:{port}: {exc}") from None
    return sockets


def _reservation(family: int, kind: int, proto: int, where: tuple) -> socket.socket:
    """A SO_REUSEPORT socket bound to `where` (see reserve_port), SO_REUSEADDR added only when
    the port's TIME_WAIT connections refuse it without."""
    for reuse_address in (False, True):
        reserved = socket.socket(family, kind, proto)
        reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if reuse_address:
            reserved.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            reserved.bind(where)
            return reserved
        except OSError as exc:
            reserved.close()
            if reuse_address or exc.errno != errno.EADDRINUSE:
                raise
    raise AssertionError("unreachable")


def _addresses(host: str, port: int) -> list[tuple[Any, ...]]:
    try:
        found = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise ConfigError(f"cannot bind gRPC to {host}:{port}: {exc}") from None
    unique: list[tuple[Any, ...]] = []
    for entry in found:
        if entry[4][:2] not in [other[4][:2] for other in unique]:
            unique.append(entry)
    return unique


class Worker:
    """One worker process; `wait_ready` returns once it serves (it writes its port on a pipe
    the parent passed it, and the pipe closing first means it exited)."""

    def __init__(self, command: list[str], env: dict[str, str], stop_timeout_s: float):
        self._command = command
        self._env = env
        self._stop_timeout_s = stop_timeout_s
        self._ready_fd: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.ready = False

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def spawn(self) -> None:
        """Start the worker without waiting. Call it from a thread that lives as long as the
        process: the worker is signalled when the thread that started it ends."""
        self.ready = False
        read_fd, write_fd = os.pipe()
        try:
            self.process = subprocess.Popen(
                [*self._command, "--ready-fd", str(write_fd)],
                env=self._env,
                stdin=subprocess.DEVNULL,
                pass_fds=(write_fd,),
                process_group=0,
            )
        except OSError as exc:
            os.close(read_fd)
            raise WorkerError(f"cannot start a server process: {exc}") from None
        finally:
            os.close(write_fd)
        self._ready_fd = read_fd

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> int:
        """Block until the worker serves and return its port; WorkerError if it exits first
        or takes longer than `timeout_s`."""
        assert self.process is not None and self._ready_fd is not None
        fd, self._ready_fd = self._ready_fd, None
        try:
            line = _read_line(fd, time.monotonic() + timeout_s)
        finally:
            os.close(fd)
        if line is None:
            self.stop()
            raise WorkerError(f"a server process did not become ready within {timeout_s:.0f}s")
        if not line:
            code = self.process.wait()
            raise WorkerError(
                f"a server process exited with code {code} before it was ready (its own error is logged above)"
            )
        self.ready = True
        return int(line)

    def signal(self, sig: int) -> None:
        """Send `sig` to a worker that is serving (one still starting has no handler yet)."""
        if self.ready and self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)

    def stop(self) -> None:
        """SIGTERM (the worker drains within its grace period), SIGKILL if it does not exit."""
        self.ready = False
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(self._stop_timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _read_line(fd: int, deadline: float) -> bytes | None:
    """One line from `fd` without its newline; b"" at end of file, None past the deadline."""
    data = b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        readable, _, _ = select.select([fd], [], [], left)
        if readable:
            chunk = os.read(fd, 64)
            if not chunk:
                return b""
            data += chunk
    return data.strip()


class Fleet:
    """The worker processes of one `serve`, each under its own supervisor; `run` raises
    WorkerError once one of them keeps exiting (logged as worker.failed, the server stops)."""

    name = "worker"

    def __init__(self, config: Config, port: int, metrics: ProcessesMetrics):
        command = [sys.executable, "-m", "memsvc", "serve", "--worker-of", str(os.getpid())]
        env = worker_env(config, port, metrics.directory)
        self._metrics = metrics
        self._rest_up = True
        self.workers = [
            Worker(command, env, stop_timeout_s=config.shutdown_grace_s + 30) for _ in range(config.processes)
        ]
        self._supervisors = [
            Supervisor("worker", worker, self._on_state(worker), WorkerError, log) for worker in self.workers
        ]

    @property
    def pids(self) -> list[int]:
        return [worker.pid for worker in self.workers if worker.pid is not None]

    async def start(self) -> None:
        """Every worker started and serving; WorkerError (the others stopped) if one cannot."""
        results = await asyncio.gather(*(s.start() for s in self._supervisors), return_exceptions=True)
        errors = [result for result in results if isinstance(result, BaseException)]
        if errors:
            await self.stop()
            raise errors[0]

    async def run(self) -> None:
        await asyncio.gather(*(s.run() for s in self._supervisors))

    async def report_rest(self, up: bool) -> None:
        """Tell every serving worker that REST went down or came back (its health says so)."""
        from memsvc.server import REST_DOWN, REST_UP

        self._rest_up = up
        for worker in self.workers:
            worker.signal(REST_UP if up else REST_DOWN)

    def _on_state(self, worker: Worker) -> Callable[[bool], Awaitable[None]]:
        async def on_state(up: bool) -> None:
            if not up and worker.pid is not None:
                self._metrics.process_exited(worker.pid)
            elif up and not self._rest_up:
                await self.report_rest(False)

        return on_state

    async def stop(self) -> None:
        """SIGTERM to every worker; returns once all have drained and exited."""
        await asyncio.gather(*(s.stop() for s in self._supervisors))
        for pid in self.pids:
            self._metrics.process_exited(pid)


def worker_env(config: Config, port: int, metrics_dir: Path) -> dict[str, str]:
    """The environment that makes a worker load `config` serving gRPC only, on `port`, with
    its metrics in the multiprocess files under `metrics_dir`."""
    own = replace(config, grpc_port=port, gateway=False, mcp_port=-1, metrics_port=-1)
    env = dict(os.environ)
    for name, value in to_env(own).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
    return env


@dataclass(frozen=True)
class Prepared:
    """What the parent learns from the database before it starts workers."""

    auth: str
    #: The store's part of the started line (AdminStores.started_fields).
    store: dict[str, str]
    local_qdrant: bool
    #: /metrics' database file gauges: the SQLite file, None for PostgreSQL.
    db_path: str | None = None


def prepare(config: Config) -> Prepared:
    """Apply the configured store's migrations once, before any worker opens it; read what
    the started line reports and whether stored settings enable Qdrant's local mode."""
    from memsvc.core.credentials import Credentials
    from memsvc.core.settings.qdrant import QdrantSettingsManager, local_mode_across_hosts
    from memsvc.storage.stores import open_admin

    stores = open_admin(config)
    try:
        stores.migrate()
        qdrant = QdrantSettingsManager(stores.settings_store, config.data_dir).get()
        if config.shared_store and qdrant.enabled and qdrant.local_path is not None:
            raise ConfigError(local_mode_across_hosts("the stored Qdrant settings enable local mode"))
        required = config.auth_enabled or Credentials(stores.credential_store).required()
        return Prepared(
            auth="bearer" if required else "none (loopback only)",
            store=stores.started_fields(),
            local_qdrant=qdrant.enabled and qdrant.local_path is not None,
            db_path=stores.info.db_path,
        )
    finally:
        stores.close()


async def serve_processes(config: Config) -> None:
    """`memsvc serve` with several processes: until SIGTERM or SIGINT (forwarded to the
    workers, which drain), or until the gateway or a worker keeps failing (raised). The
    parent imports the server's modules (about a second) only after the workers started,
    so starting costs one interpreter start, not two in a row."""
    loop = asyncio.get_running_loop()
    prepared = await loop.run_in_executor(None, prepare, config)
    if prepared.local_qdrant:
        log.warning(
            "server.single_process",
            extra={
                "processes": config.processes,
                "reason": "Qdrant local mode (localPath) is enabled and its folder "
                "can be opened by one process only: set a Qdrant server URL instead to serve with several processes",
            },
        )
        from memsvc.server import serve

        await serve(replace(config, processes=1))
        return
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sockets = reserve_port(config.grpc_host, config.grpc_port)
    try:
        await _serve_fleet(config, sockets[0].getsockname()[1], prepared, stop)
    finally:
        for reserved in sockets:
            reserved.close()


async def _serve_fleet(config: Config, port: int, prepared: Prepared, stop: asyncio.Event) -> None:
    from memsvc.metrics import ProcessesMetrics, StateSources

    # Off the data disk: a full data disk must not SIGBUS the workers (memsvc.metrics).
    metrics = ProcessesMetrics.private(StateSources(db_path=prepared.db_path))
    fleet = Fleet(config, port, metrics)
    mcp_http = supervisor = tracing = None
    try:
        await fleet.start()
        from memsvc.api.trace_export import start as start_tracing
        from memsvc.server import serve_metrics, start_gateway, start_mcp, until_stopped

        # This process's own spans are the MCP SDK's (each worker traces the RPCs it serves):
        # with MCP off there are none to export.
        tracing = start_tracing(config) if config.mcp_port >= 0 else None
        if tracing is not None:
            tracing.make_global()
        mcp_http = await start_mcp(config, port)
        config = replace(config, mcp_port=mcp_http.port if mcp_http is not None else -1)
        log.info(
            "server.started",
            extra={
                "grpc_host": config.grpc_host,
                "grpc_port": port,
                "metrics_port": serve_metrics(metrics, config),
                "auth": prepared.auth,
                **prepared.store,
                "processes": config.processes,
                "worker_pids": fleet.pids,
                "metrics_dir": str(metrics.directory),
            },
        )
        if config.gateway:
            supervisor = await start_gateway(config, port, fleet.report_rest)
        await until_stopped(stop, fleet, supervisor)
        log.info("server.stopping", extra={"grace_s": config.shutdown_grace_s})
    finally:
        if mcp_http is not None:  # before the workers: its calls in flight still need them
            await mcp_http.stop()
        if tracing is not None:
            tracing.stop()
        await fleet.stop()
        if supervisor is not None:  # after the workers drained: REST requests in flight finish too
            await supervisor.stop()
        metrics.close()
        log.info("server.stopped")


def run_worker(config: Config, parent_pid: int, ready_fd: int) -> int:
    """A worker's life (`memsvc serve --worker-of <pid>`): bound to its parent, it serves
    until told to stop; its port goes on `ready_fd` once it serves."""
    from memsvc.logs import configure
    from memsvc.metrics import MetricsFilesError, preallocate_worker_files
    from memsvc.server import REST_DOWN, REST_UP, serve_worker

    configure(config.log_level, with_process=True)
    try:  # before any metric exists: prometheus_client would create them with holes
        preallocate_worker_files(Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]))
    except MetricsFilesError as exc:
        log.error("worker.metrics_files_failed", extra={"error": str(exc)})
        return 75  # EX_TEMPFAIL: the parent restarts it with backoff
    for sig in (REST_DOWN, REST_UP):  # until its handlers are in place, these must not kill it
        signal.signal(sig, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    if os.getppid() != parent_pid:  # the parent went before the request took effect
        return 70

    def ready(port: int) -> None:
        os.write(ready_fd, f"{port}\n".encode())
        os.close(ready_fd)

    asyncio.run(serve_worker(config, ready))
    return 0
