"""`memsvc cluster`: the scale-out deployment on one machine, in the foreground, to try it.

It starts what an operator starts on several hosts, with the same commands:
1. a PostgreSQL 16 with pgvector from the binaries the `cluster` extra bundles
   (memsvc.storage.postgres.local_server: loopback TCP, a data folder of its own, kept across runs; as root
   it runs as `nobody`);
2. N replicas, each `memsvc serve --no-gateway --processes 1 --database-url URL` on a gRPC
   port of its own with a data folder of its own (the replicas migrate the shared database,
   one after another under the migration lock);
3. the gateway, `memsvc gateway --replica HOST:PORT ...`: Envoy round-robins REST over them.

It prints each command line, the URLs and the log files, runs until SIGTERM, SIGINT (Ctrl-C)
or SIGHUP, then stops the gateway, the replicas and PostgreSQL in that order and waits until
every process below it is gone. A child that exits on its own stops the rest (exit 1). Every
child asks the kernel for SIGTERM if this process dies, so even `kill -9` leaves nothing
running. This process starts no threads: the children are forked with a preexec hook, which
is safe only in a single-threaded parent."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from memsvc import config as cfg
from memsvc.process_tree import descendants, die_with_parent, wait_gone

log = logging.getLogger("memsvc.cluster")
HELP = "try the scale-out path on one machine: a local PostgreSQL, N replicas and the gateway, until Ctrl-C"
DATABASE = "memsvc"
READY_TIMEOUT_S = 180.0  # a replica opens its App (models included) before it logs server.started
STOP_TIMEOUT_S = 30.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class ClusterError(RuntimeError):
    """Something the cluster runs could not start or exited; the message says which and why."""


def add_command(commands: argparse._SubParsersAction) -> None:
    sub = commands.add_parser("cluster", help=HELP, description=HELP)
    sub.add_argument("--replicas", type=int, default=2, help="memsvc replicas to run (1-16; default 2)")
    sub.add_argument(
        "--dir",
        dest="cluster_dir",
        type=Path,
        default=Path("./data-cluster"),
        help="folder for PostgreSQL's data, each replica's data folder and the logs (default ./data-cluster)",
    )
    sub.add_argument(
        "--rest-port",
        dest="cluster_rest_port",
        type=int,
        default=8080,
        help="REST port of the gateway (default 8080; 0 picks a free one)",
    )
    sub.add_argument(
        "--grpc-port",
        dest="cluster_grpc_port",
        type=int,
        default=50061,
        help="gRPC port of the first replica, the next ones count up (default 50061; 0 picks free ones)",
    )
    sub.add_argument("--postgres-port", type=int, default=0, help="PostgreSQL's loopback port (default 0: a free one)")
    sub.set_defaults(handler=run)


def _check(args: argparse.Namespace) -> None:
    if not 1 <= args.replicas <= 16:
        raise cfg.ConfigError(f"--replicas must be 1..16, got {args.replicas}")
    for name in ("cluster_rest_port", "cluster_grpc_port", "postgres_port"):
        if not 0 <= getattr(args, name) <= 65535:
            raise cfg.ConfigError(f"--{name.removeprefix('cluster_').replace('_', '-')} must be 0..65535")
    if args.cluster_grpc_port and args.cluster_grpc_port + args.replicas - 1 > 65535:
        raise cfg.ConfigError("--grpc-port leaves no room for every replica's port")


@dataclass
class Child:
    """One memsvc process the cluster runs, its output appended to `log_path`."""

    name: str
    command: list[str]
    log_path: Path
    proc: subprocess.Popen | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)
    #: Where this run's output starts in the log (earlier runs' lines stay above it).
    _offset: int = 0

    def start(self) -> None:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - held while the process runs, closed after it ends
        self._offset = self._log.tell()
        # Its own session: a Ctrl-C in the terminal reaches this process only, which then
        # stops the children in order.
        self.proc = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - one prctl call found beforehand, no locks taken
        )

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def event(self, name: str) -> dict | None:
        """The first JSON log line of this run of the child whose event is `name`, if written yet."""
        with suppress(OSError), open(self.log_path, "rb") as log:
            log.seek(self._offset)
            for line in log.read().decode("utf-8", "replace").splitlines():
                if line.startswith("{") and f'"{name}"' in line:
                    with suppress(ValueError):
                        entry = json.loads(line)
                        if entry.get("event") == name:
                            return entry
        return None

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM (a replica drains, the gateway stops Envoy); SIGKILL to its whole process
        group if it has not exited within the bound; then wait for everything below it."""
        if self.proc is not None and self.proc.poll() is None:
            below = descendants(self.proc.pid)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("cluster.child.killed", extra={"child": self.name, "pid": self.proc.pid})
                with suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            for pid in below:
                if not wait_gone(pid, timeout_s):
                    with suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None

    def tail(self, lines: int = 15) -> str:
        with suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""


class _Stop(Exception):
    """A stop signal arrived."""


#: The stop signals received. The handler only records them; the start-up steps and the
#: watch loop check between steps, so nothing is left half-started by a signal mid-call.
_requested: list[str] = []


def _on_signal(signum: int, _frame: object) -> None:
    _requested.append(signal.Signals(signum).name)


def _check_stop() -> None:
    if _requested:
        raise _Stop(_requested[0])


def _memsvc(*args: str) -> list[str]:
    return [sys.executable, "-m", "memsvc", *args]


def _replica_ports(args: argparse.Namespace) -> list[int]:
    from memsvc.storage.postgres.local_server import free_port

    if args.cluster_grpc_port == 0:
        return [free_port() for _ in range(args.replicas)]
    return [args.cluster_grpc_port + i for i in range(args.replicas)]


def _children(args: argparse.Namespace, root: Path, url: str) -> tuple[list[Child], Child]:
    """The replicas' and the gateway's command lines, as an operator would type them."""
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    ports = _replica_ports(args)
    replicas = [
        Child(
            f"replica-{i}",
            _memsvc(
                "serve",
                "--no-gateway",
                "--processes",
                "1",
                "--database-url",
                url,
                "--grpc-port",
                str(port),
                "--data-dir",
                str(root / f"replica-{i}"),
                "--metrics-port",
                "-1",
                "--mcp-port",
                "-1",
            ),
            logs / f"replica-{i}.log",
        )
        for i, port in enumerate(ports, start=1)
    ]
    listed = [arg for port in ports for arg in ("--replica", f"127.0.0.1:{port}")]
    gateway = Child(
        "gateway",
        _memsvc(
            "gateway",
            *listed,
            "--rest-port",
            str(args.cluster_rest_port),
            "--data-dir",
            str(root / "gateway"),
            "--mcp-port",
            "-1",
        ),
        logs / "gateway.log",
    )
    return replicas, gateway


def _wait_for_event(children: list[Child], event: str, timeout_s: float = READY_TIMEOUT_S) -> list[dict]:
    """Each child's `event` log entry, once all have written it; ClusterError naming the
    child (and its log's last lines) that exits first or takes longer than the bound."""
    deadline = time.monotonic() + timeout_s
    found: dict[str, dict] = {}
    while len(found) < len(children):
        _check_stop()
        for child in children:
            if child.name not in found and (entry := child.event(event)) is not None:
                found[child.name] = entry
            elif child.name not in found and child.exited() is not None:
                raise ClusterError(
                    f"{child.name} exited with {child.exited()} while starting (log {child.log_path}):\n{child.tail()}"
                )
        if len(found) < len(children) and time.monotonic() > deadline:
            raise ClusterError(
                f"no {event} within {timeout_s:.0f} s from "
                + ", ".join(c.name for c in children if c.name not in found)
            )
        time.sleep(0.1)
    return [found[child.name] for child in children]


def _wait_serving(gateway: Child, rest_port: int, timeout_s: float = 60.0) -> None:
    """Until the gateway's /healthz answers 200: Envoy runs and a replica passes its check."""
    deadline = time.monotonic() + timeout_s
    while True:
        _check_stop()
        with suppress(urllib.error.URLError, OSError):
            with urllib.request.urlopen(f"http://127.0.0.1:{rest_port}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return
        if gateway.exited() is not None:
            raise ClusterError(
                f"the gateway exited with {gateway.exited()} (log {gateway.log_path}):\n{gateway.tail()}"
            )
        if time.monotonic() > deadline:
            raise ClusterError(f"the gateway's /healthz did not answer 200 within {timeout_s:.0f} s")
        time.sleep(0.1)


def _start_postgres(args: argparse.Namespace, root: Path, started: list) -> str:
    """The cluster's PostgreSQL, created on the first run, and the URL of its memsvc
    database; the server is in `started` before it starts, so it is stopped whatever follows."""
    from memsvc.storage.postgres.local_server import BASE_SETTINGS, PostgresServer, start_on_a_free_port

    server = PostgresServer(
        root / "postgres", port=args.postgres_port or None, settings=BASE_SETTINGS, tied_to_parent=True
    )
    started.append(server)
    if not server.initialized:
        print(f"memsvc cluster: creating a PostgreSQL cluster in {server.data_dir}", flush=True)
        server.init()
    if args.postgres_port:
        server.start()
    else:
        start_on_a_free_port(server)
    url = server.ensure_database(DATABASE)
    print(f"memsvc cluster: PostgreSQL at {url} (data {server.data_dir}, log {server.log_path})", flush=True)
    return url


def _start(args: argparse.Namespace, root: Path, started: list) -> None:
    """PostgreSQL, then the replicas, then the gateway, each once the one before serves;
    what started is appended to `started` (the caller stops it)."""
    url = _start_postgres(args, root, started)
    _check_stop()
    replicas, gateway = _children(args, root, url)
    for replica in replicas:
        print(f"memsvc cluster: {replica.name}: {' '.join(['memsvc', *replica.command[3:]])}", flush=True)
        started.append(replica)
        replica.start()
    for replica, entry in zip(replicas, _wait_for_event(replicas, "server.started")):
        print(
            f"memsvc cluster: {replica.name} serves gRPC on 127.0.0.1:{entry.get('grpc_port')} "
            f"(log {replica.log_path})",
            flush=True,
        )
    print(f"memsvc cluster: gateway: {' '.join(['memsvc', *gateway.command[3:]])}", flush=True)
    started.append(gateway)
    gateway.start()
    rest_port = _wait_for_event([gateway], "gateway.started", 60.0)[0]["rest_port"]
    _wait_serving(gateway, rest_port)
    print(
        f"memsvc cluster: ready: REST http://127.0.0.1:{rest_port} (log {gateway.log_path}); "
        "Ctrl-C or SIGTERM stops everything",
        flush=True,
    )


def _watch(children: list[Child]) -> None:
    """Until a stop signal (raises _Stop) or a child's exit (ClusterError)."""
    while True:
        _check_stop()
        for child in children:
            if child.exited() is not None:
                raise ClusterError(f"{child.name} exited with {child.exited()} (log {child.log_path}):\n{child.tail()}")
        time.sleep(0.2)


def run(conf: cfg.Config, args: argparse.Namespace) -> int:
    """Exit 0 after a stop signal, 1 when something could not start or exited on its own."""
    from memsvc.storage.postgres.local_server import LocalPostgresError

    _check(args)
    root = args.cluster_dir.resolve()
    started: list = []
    _requested.clear()
    previous = {sig: signal.signal(sig, _on_signal) for sig in _STOP_SIGNALS}
    code = 0
    try:
        _start(args, root, started)
        _watch([c for c in started if isinstance(c, Child)])
    except _Stop as stop:
        log.info("cluster.stopping", extra={"signal": str(stop)})
    except (ClusterError, LocalPostgresError) as exc:
        print(f"memsvc cluster: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        for sig in _STOP_SIGNALS:  # a second Ctrl-C must not cut the stop short
            signal.signal(sig, signal.SIG_IGN)
        for thing in reversed(started):
            thing.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("memsvc cluster: stopped", flush=True)
    return code
