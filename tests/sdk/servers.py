"""Servers for the SDK tests beyond the root conftest's: a memsvc whose port comes up only
when the test says so, and a relay in front of a real memsvc that answers UNAVAILABLE for a
number of attempts (what a client sees while a load balancer drains a restarting backend)."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
from conftest import ServerHandle
from memsvc_client import RetryPolicy

from memsvc.app import App
from memsvc.config import Config
from memsvc.server import start

# Retries of the tests that count attempts at a FlakyRelay: five attempts, milliseconds apart.
QUICK_RETRY = RetryPolicy(max_attempts=5, initial_backoff=0.01, max_backoff=0.05)


def address(handle: ServerHandle) -> str:
    return f"127.0.0.1:{handle.port}"


class LateServer:
    """A memsvc whose App (database, migrations, settings) is opened now and whose gRPC port
    is bound only by `start()`: between the two nobody listens on `config.grpc_port`."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="memsvc-late-server", daemon=True)
        self.thread.start()
        self.app = asyncio.run_coroutine_threadsafe(self._open(), self.loop).result(60)

    async def _open(self) -> App:
        return await asyncio.get_running_loop().run_in_executor(None, App.open, self.config)

    def start(self) -> ServerHandle:
        running = asyncio.run_coroutine_threadsafe(start(self.config, self.app), self.loop).result(60)
        return ServerHandle(self.config, running.port, self.loop, self.thread, running)


class FlakyRelay(grpc.GenericRpcHandler):
    """A gRPC server relaying unary calls and the server streams (`STREAMS`) to `upstream`
    byte for byte (metadata included), except that the next `fail_next(n)` attempts end with
    UNAVAILABLE before reaching it. `attempts` counts every attempt per method, so a test can
    tell how often a client sent a call; a retried call arrives once per attempt."""

    MESSAGE = "relay: upstream is restarting"
    STREAMS = frozenset({"/memsvc.v1.MemoryService/WatchMemories", "/memsvc.v1.EngineService/Reindex"})

    def __init__(self, upstream: str) -> None:
        self._upstream = grpc.insecure_channel(upstream)
        self._lock = threading.Lock()
        self._failures = 0
        self.attempts: Counter[str] = Counter()
        self._server = grpc.server(futures.ThreadPoolExecutor(8), handlers=[self])
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def fail_next(self, count: int) -> None:
        with self._lock:
            self._failures = count
            self.attempts.clear()

    def stop(self) -> None:
        self._server.stop(None).wait(10)
        self._upstream.close()

    def _attempt(self, method: str, context: grpc.ServicerContext) -> list[tuple[str, str]]:
        """Counts the attempt and refuses it while failures are due; else the metadata to
        pass on."""
        with self._lock:
            self.attempts[method] += 1
            fail = self._failures > 0
            self._failures -= 1 if fail else 0
        if fail:
            context.abort(grpc.StatusCode.UNAVAILABLE, self.MESSAGE)
        return [(k, v) for k, v in context.invocation_metadata() if not k.startswith("grpc-")]

    @staticmethod
    def _pass_on(err: grpc.RpcError, context: grpc.ServicerContext) -> None:
        context.set_trailing_metadata(err.trailing_metadata() or ())  # type: ignore[attr-defined]
        context.abort(err.code(), err.details() or "")  # type: ignore[attr-defined]

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method

        def relay(request: bytes, context: grpc.ServicerContext) -> Any:
            metadata = self._attempt(method, context)
            call = self._upstream.unary_unary(method)
            try:
                return call(request, metadata=metadata, timeout=context.time_remaining())
            except grpc.RpcError as err:
                self._pass_on(err, context)

        def relay_stream(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
            metadata = self._attempt(method, context)
            call = self._upstream.unary_stream(method)(request, metadata=metadata, timeout=context.time_remaining())
            context.add_callback(call.cancel)
            try:
                yield from call
            except grpc.RpcError as err:
                self._pass_on(err, context)

        if method in self.STREAMS:
            return grpc.unary_stream_rpc_method_handler(relay_stream)
        return grpc.unary_unary_rpc_method_handler(relay)
