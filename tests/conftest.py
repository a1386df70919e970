"""Shared fixtures: a real memsvc gRPC server in-process (port 0, its own event loop on a
thread, so tests call it through the generated synchronous stubs) and, for e2e tests, the
real Envoy binary in front of it."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from support.processes import leftovers

from memsvc.app import App
from memsvc.config import Config
from memsvc.gateway.launcher import Gateway
from memsvc.server import RunningServer, start
from memsvc.v1 import engine_pb2_grpc, memory_pb2_grpc, settings_pb2_grpc

if TYPE_CHECKING:
    from support.postgres import PostgresServer


@dataclass
class ServerHandle:
    config: Config
    port: int
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    running: RunningServer
    channels: list[grpc.Channel] = field(default_factory=list)

    def channel(self, token: str | None = None) -> grpc.Channel:
        """A channel that sends `token` as a bearer token on every call (if given)."""
        ch = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        if token is not None:
            ch = grpc.intercept_channel(ch, _BearerInterceptor(token))
        self.channels.append(ch)
        return ch

    def stubs(self, token: str | None = None) -> Stubs:
        ch = self.channel(token)
        return Stubs(
            memory_pb2_grpc.MemoryServiceStub(ch),
            engine_pb2_grpc.EngineServiceStub(ch),
            settings_pb2_grpc.SettingsServiceStub(ch),
        )

    @property
    def app(self) -> App:
        return self.running.app

    def stop(self) -> None:
        for ch in self.channels:
            ch.close()
        asyncio.run_coroutine_threadsafe(self.running.stop(1.0), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@dataclass
class Stubs:
    memory: memory_pb2_grpc.MemoryServiceStub
    engine: engine_pb2_grpc.EngineServiceStub
    settings: settings_pb2_grpc.SettingsServiceStub


class _BearerInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    def __init__(self, token: str):
        self._token = token

    def _with_token(self, details):
        metadata = list(details.metadata or []) + [("authorization", f"Bearer {self._token}")]
        return _Details(details, metadata)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._with_token(details), request)


class _Details(grpc.ClientCallDetails):
    def __init__(self, base, metadata):
        self.method = base.method
        self.timeout = base.timeout
        self.metadata = metadata
        self.credentials = base.credentials
        self.wait_for_ready = getattr(base, "wait_for_ready", None)
        self.compression = getattr(base, "compression", None)


def start_server(config: Config) -> ServerHandle:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="memsvc-test-server", daemon=True)
    thread.start()

    async def boot() -> RunningServer:
        app = await asyncio.get_running_loop().run_in_executor(None, App.open, config)
        return await start(config, app)

    running = asyncio.run_coroutine_threadsafe(boot(), loop).result(60)
    return ServerHandle(config, running.port, loop, thread, running)


def make_config(tmp_path: Path, **overrides: Any) -> Config:
    # auto_static off: tests choose their embedding source; tests of the out-of-box default turn it on.
    base = Config(
        data_dir=tmp_path / "data", grpc_port=0, gateway=False, workers=4, log_level="WARNING", auto_static=False
    )
    return replace(base, **overrides)


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fails the run if an Envoy, memsvc or PostgreSQL process the suite started outlives it:
    a child of this process, or an orphan (its parent killed) whose command line names this
    run's temp dir. Processes get a generous bounded while to exit after their last test."""
    marker = str(tmp_path_factory.getbasetemp())
    yield
    deadline = time.monotonic() + 30
    names = ("envoy", "memsvc", "postgres")
    while (left := leftovers(os.getpid(), marker, names)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left:
        pytest.fail(
            "processes left behind by the test run:\n" + "\n".join(f"{pid}: {line}" for pid, line in left.items()),
            pytrace=False,
        )


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL with pgvector for the run (tests/support/postgres.py), on a free
    loopback port; imported here only when asked for, so a venv without the dev extra's
    server still runs every other test."""
    from support.postgres import running_postgres

    with running_postgres() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """postgresql://postgres@127.0.0.1:PORT/postgres of the run's server."""
    return postgres_server.url


@pytest.fixture
def postgres_db_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A database of the test's own on the run's server (vector extension created), dropped
    after the test, so tests sharing the server never see each other's tables."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    yield postgres_server.create_database(name)
    postgres_server.drop_database(name)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerHandle]:
    handle = start_server(make_config(tmp_path))
    yield handle
    handle.stop()


@pytest.fixture
def boot(tmp_path: Path) -> Iterator[Callable[..., tuple[ServerHandle, Stubs]]]:
    """Servers of a test's own, each with its config overrides (settings are global to a
    server): `handle, stubs = boot(**overrides)`; all stopped after the test."""
    handles: list[ServerHandle] = []

    def start(**overrides: Any) -> tuple[ServerHandle, Stubs]:
        handle = start_server(make_config(tmp_path / f"server{len(handles)}", **overrides))
        handles.append(handle)
        return handle, handle.stubs()

    yield start
    for handle in handles:
        handle.stop()


@pytest.fixture
def stubs(server: ServerHandle) -> Stubs:
    return server.stubs()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Rest:
    """Minimal JSON-over-HTTP client for the Envoy gateway (stdlib only)."""

    base: str
    token: str | None = None

    def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, raw: bytes | None = None
    ) -> tuple[int, Any]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("content-type", "application/json")
        if self.token:
            req.add_header("authorization", f"Bearer {self.token}")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, _json_or_text(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, _json_or_text(err.read())


def _json_or_text(payload: bytes) -> Any:
    try:
        return json.loads(payload) if payload else None
    except ValueError:
        return payload.decode("utf-8", "replace")


def start_gateway(handle: ServerHandle) -> Gateway:
    conf = replace(handle.config, rest_port=free_port())
    gateway = Gateway.for_config(conf, grpc_port=handle.port)
    gateway.start()
    return gateway


@pytest.fixture
def rest(server: ServerHandle) -> Iterator[Rest]:
    gateway = start_gateway(server)
    yield Rest(f"http://127.0.0.1:{gateway.settings.listen_port}")
    gateway.stop()
