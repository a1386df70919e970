"""The gRPC server: servicers, interceptors, reflection, health, graceful shutdown.

`start` is what tests use (port 0, in-process); `serve` is `memsvc serve`: it also starts the
Envoy gateway and waits for SIGTERM/SIGINT, then drains: health NOT_SERVING first so load
balancers stop sending, in-flight RPCs get the grace period, the database closes last.
Envoy is supervised while serving: restarted when it exits, and the server stops with an
error when it cannot be started or keeps exiting. With several server processes
(memsvc.processes) the parent runs Envoy, and each worker runs `serve_worker`.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from memsvc.api.credential_servicer import CredentialServicer
from memsvc.api.decoding import DecodingInterceptor
from memsvc.api.engine_servicer import EngineServicer
from memsvc.api.interceptors import AuthInterceptor, ErrorInterceptor, RequestContextInterceptor
from memsvc.api.memory_servicer import MemoryServicer
from memsvc.api.oauth import OAuthSettings, Verifier
from memsvc.api.settings_servicer import SettingsServicer
from memsvc.api.trace_export import Tracing
from memsvc.api.trace_export import start as start_tracing
from memsvc.api.tracing import TracingInterceptor
from memsvc.app import App
from memsvc.config import Config, ConfigError
from memsvc.v1 import (
    credentials_pb2,
    credentials_pb2_grpc,
    engine_pb2,
    engine_pb2_grpc,
    memory_pb2,
    memory_pb2_grpc,
    settings_pb2,
    settings_pb2_grpc,
)

if TYPE_CHECKING:
    from memsvc.gateway.launcher import GatewaySupervisor
    from memsvc.mcp.http import McpHttp
    from memsvc.metrics import Metrics, ProcessesMetrics

log = logging.getLogger("memsvc.server")

SERVICE_NAMES = tuple(
    module.DESCRIPTOR.services_by_name[name].full_name
    for module, name in (
        (memory_pb2, "MemoryService"),
        (engine_pb2, "EngineService"),
        (settings_pb2, "SettingsService"),
    )
)
# The operator's service, apart from the memory API's three (whose RPCs the tests count).
CREDENTIAL_SERVICE = credentials_pb2.DESCRIPTOR.services_by_name["CredentialService"].full_name
ALL_SERVICE_NAMES = (*SERVICE_NAMES, CREDENTIAL_SERVICE)


@dataclass
class RunningServer:
    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer
    app: App
    #: The span export pipeline, when OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_) turns tracing on.
    tracing: Tracing | None = None

    async def stop(self, grace_s: float, drained: Callable[[], Awaitable[None]] | None = None) -> None:
        """Stop taking work, let in-flight RPCs finish within the grace period, await
        `drained` (serve stops Envoy there, so REST requests in flight finish too), export
        the spans still queued, close the DB."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace_s)
        await self.app.feed.aclose()
        if drained is not None:
            await drained()
        loop = asyncio.get_running_loop()
        if self.tracing is not None:
            await loop.run_in_executor(None, self.tracing.stop)
        await loop.run_in_executor(None, self.app.close)


def _interceptors(config: Config, app: App, tracing: Tracing | None = None) -> list[grpc.aio.ServerInterceptor]:
    chain: list[grpc.aio.ServerInterceptor] = []
    if tracing is not None:  # outermost: its span covers the others and sees the final status
        chain.append(TracingInterceptor(tracing.tracer, config.trace_content))
    chain.append(RequestContextInterceptor(app.metrics.observe_rpc))
    # Always in the chain: a credential created while the server runs (by `memsvc tokens`,
    # from another process) turns authentication on from the next request.
    oauth = OAuthSettings.from_config(config)
    verifier = Verifier(oauth) if oauth is not None else None
    chain.append(AuthInterceptor(config.api_tokens, app.credentials, app.memories.owner_of, verifier))
    chain.append(ErrorInterceptor(app.metrics.observe_failure))
    chain.append(DecodingInterceptor())  # innermost: refuses undecodable requests after auth
    return chain


MAX_METADATA_BYTES = 64 * 1024
# What a worker process is told by its parent when the REST gateway goes down or comes back.
REST_DOWN, REST_UP = signal.SIGUSR1, signal.SIGUSR2


def _bind(server: grpc.aio.Server, host: str, port: int) -> int:
    address = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError as exc:
        raise ConfigError(f"cannot bind gRPC to {address}: {exc}") from None
    if not bound:
        raise ConfigError(f"cannot bind gRPC to {address}")
    return bound


async def start(config: Config, app: App, shared_port: bool = False) -> RunningServer:
    """Start serving `app` on config.grpc_host:grpc_port (0 = any free port). `shared_port`:
    one of several worker processes binding the same port (SO_REUSEPORT), which the kernel
    spreads connections over. The embedding model the settings select is loaded before the
    port is bound (App.load_model), so the first Retrieve is already hybrid."""
    config.validate()
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(config.workers, thread_name_prefix="memsvc-worker"))
    tracing = start_tracing(config)
    try:
        return await _start(config, app, shared_port, tracing)
    except BaseException:
        if tracing is not None:
            tracing.stop()
        raise


async def _start(config: Config, app: App, shared_port: bool, tracing: Tracing | None) -> RunningServer:
    loop = asyncio.get_running_loop()
    server = grpc.aio.server(
        interceptors=_interceptors(config, app, tracing),
        options=[
            ("grpc.max_receive_message_length", config.max_message_bytes),
            ("grpc.max_send_message_length", config.max_message_bytes),
            # Without this a second server could silently share the port; the workers of one
            # `serve` share it on purpose (their parent checked that nobody else holds it).
            ("grpc.so_reuseport", 1 if shared_port else 0),
            # Request headers as metadata: gRPC's defaults (refuse some calls above 8 KiB, all
            # above 16 KiB, as RESOURCE_EXHAUSTED) are below what Envoy forwards for a REST
            # request it accepts (32 KiB of headers, the URL once more as
            # x-envoy-original-path). Equal soft and hard limits: no call is refused at random.
            ("grpc.max_metadata_size", MAX_METADATA_BYTES),
            ("grpc.absolute_max_metadata_size", MAX_METADATA_BYTES),
        ],
    )
    memory_pb2_grpc.add_MemoryServiceServicer_to_server(MemoryServicer(app.memories, app.characters, app.feed), server)
    engine_pb2_grpc.add_EngineServiceServicer_to_server(
        EngineServicer(app.engine, app.introspection, app.reindexer, app.metrics.observe_inline), server
    )
    settings_pb2_grpc.add_SettingsServiceServicer_to_server(
        SettingsServicer(app.settings, app.characters, app.introspection), server
    )
    credentials_pb2_grpc.add_CredentialServiceServicer_to_server(CredentialServicer(app.credentials), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((*ALL_SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    # Before the port is bound: a worker sharing the port gets connections once it listens.
    await loop.run_in_executor(None, app.load_model)
    port = _bind(server, config.grpc_host, config.grpc_port)
    await server.start()
    for name in ("", *ALL_SERVICE_NAMES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    loop.run_in_executor(None, app.warm)  # off the request path, after SERVING
    return RunningServer(server, port, health_servicer, app, tracing)


def serve_metrics(metrics: Metrics | ProcessesMetrics, config: Config) -> int | None:
    """The /metrics endpoint; a port that cannot be bound is logged, not fatal (the memory
    service matters more than its metrics)."""
    if config.metrics_port < 0:
        return None
    try:
        return metrics.serve(config.metrics_host, config.metrics_port)
    except OSError as exc:
        log.error("metrics.bind_failed", extra={"port": config.metrics_port, "error": str(exc)})
        return None


def _one_blas_thread() -> None:
    """NumPy's BLAS runs each request's matrix-vector product (the per-owner vector scan) on
    one thread. Its default thread per core busy-waits for the others: on a server whose
    cores already run other requests, a 10k × 256 scan took 9 ms instead of 1.3 ms, and a
    single product gains little from a second thread. Concurrency comes from requests."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def _report_rest_soon(health_servicer: health.aio.HealthServicer, up: bool) -> None:
    """A signal handler's `report_rest`: scheduled on the loop, not awaited. The task is kept
    until it ends: the loop holds only a weak reference to it."""
    task = asyncio.ensure_future(report_rest(health_servicer, up))
    _REPORTS.add(task)
    task.add_done_callback(_REPORTS.discard)


_REPORTS: set[asyncio.Future[None]] = set()


async def report_rest(health_servicer: health.aio.HealthServicer, up: bool) -> None:
    """While REST is down the overall gRPC health status is NOT_SERVING (the service answers
    only half its contract); the per-service statuses stay SERVING, since gRPC still serves them."""
    status = health_pb2.HealthCheckResponse.SERVING if up else health_pb2.HealthCheckResponse.NOT_SERVING
    await health_servicer.set("", status)


async def start_gateway(config: Config, grpc_port: int, report: Callable[[bool], Awaitable[None]]) -> GatewaySupervisor:
    """Envoy in front of the gRPC server on `grpc_port`, supervised; `report(up)` is awaited
    when REST goes down or comes back."""
    from memsvc.gateway.launcher import Gateway, GatewayError, GatewaySupervisor  # optional at run time

    supervisor = GatewaySupervisor(Gateway.for_config(config, grpc_port=grpc_port), report)
    try:
        rest_port = await supervisor.start()
    except GatewayError as exc:
        log.error("gateway.failed", extra={"error": str(exc)})
        raise
    log.info(
        "gateway.started", extra={"rest_host": config.rest_host, "rest_port": rest_port, "pid": supervisor.gateway.pid}
    )
    return supervisor


class Watched(Protocol):
    """What `until_stopped` watches: a Supervisor, or the Fleet of worker processes."""

    name: str

    async def run(self) -> None: ...


async def until_stopped(stop: asyncio.Event, *supervisors: Watched | None) -> None:
    """Wait for SIGTERM/SIGINT, or for one of the supervisors (of the gateway, of the worker
    processes) to give up: its error is logged as <name>.failed and raised."""
    watches = {asyncio.ensure_future(s.run()): s.name for s in supervisors if s is not None}
    if not watches:
        await stop.wait()
        return
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait({*watches, stopped}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    failed = [
        (name, error) for watch, name in watches.items() if watch.done() and (error := watch.exception()) is not None
    ]
    for watch in watches:
        watch.cancel()
    if failed:
        name, error = failed[0]
        log.error(f"{name}.failed", extra={"error": str(error)})
        raise error


async def start_mcp(config: Config, grpc_port: int) -> McpHttp | None:
    """The MCP HTTP server, or None when it is off. Its SDK takes about two seconds to
    import: that runs on a worker thread, so the gRPC server already serving keeps
    answering meanwhile (on the event loop's thread it answered nothing until it was done),
    and `serve` alone loads it, never the tests' in-process servers."""
    if config.mcp_port < 0:
        return None
    module = await asyncio.get_running_loop().run_in_executor(None, importlib.import_module, "memsvc.mcp.http")
    return await module.start_http(config, grpc_port)


async def serve(config: Config) -> None:
    """Run until SIGTERM or SIGINT, with the gateway unless disabled. A gateway that cannot
    start, or keeps exiting, stops the server with GatewayError (REST is part of the
    service; `--no-gateway` runs gRPC alone)."""
    _one_blas_thread()
    loop = asyncio.get_running_loop()
    app = await loop.run_in_executor(None, App.open, config)
    running = await start(config, app)
    if running.tracing is not None:  # the MCP SDK's spans too (it traces through the global provider)
        running.tracing.make_global()
    mcp_http = await start_mcp(config, running.port)
    config = replace(config, mcp_port=mcp_http.port if mcp_http is not None else -1)  # where Envoy sends /mcp
    metrics_port = serve_metrics(app.metrics, config)
    log.info(
        "server.started",
        extra={
            "grpc_host": config.grpc_host,
            "grpc_port": running.port,
            "metrics_port": metrics_port,
            "auth": ("bearer" if config.auth_enabled or app.credentials.required() else "none (loopback only)"),
            **app.stores.started_fields(),
        },
    )
    supervisor = None
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        if config.gateway:
            supervisor = await start_gateway(config, running.port, lambda up: report_rest(running.health, up))
        await until_stopped(stop, supervisor)
        log.info("server.stopping", extra={"grace_s": config.shutdown_grace_s})
    finally:
        if mcp_http is not None:  # before gRPC: its calls in flight still need it
            await mcp_http.stop()
        await running.stop(config.shutdown_grace_s, supervisor.stop if supervisor is not None else None)
        log.info("server.stopped")


async def serve_worker(config: Config, ready: Callable[[int], None]) -> None:
    """One of the gRPC server processes of a several-process `serve`: its own App and health
    servicer on the shared port; `ready(port)` once it serves. The parent runs Envoy, MCP
    and /metrics, and tells the worker when REST goes down (SIGUSR1) or comes back
    (SIGUSR2), so health reads the same in every worker. Drains on SIGTERM/SIGINT as a
    single process does."""
    _one_blas_thread()
    loop = asyncio.get_running_loop()
    app = await loop.run_in_executor(None, App.open, config)
    app.qdrant_settings.shared_by(config.processes)
    app.metrics.publish_state()
    running = await start(config, app, shared_port=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    for sig, up in ((REST_DOWN, False), (REST_UP, True)):
        loop.add_signal_handler(sig, functools.partial(_report_rest_soon, running.health, up))
    log.info("worker.started", extra={"pid": os.getpid(), "grpc_port": running.port})
    ready(running.port)
    try:
        await stop.wait()
        log.info("worker.stopping", extra={"grace_s": config.shutdown_grace_s})
    finally:
        await running.stop(config.shutdown_grace_s)
        log.info("worker.stopped")
