"""A recording gRPC hop on loopback, between a client under test and a real memsvc server.

Every unary call is forwarded unchanged (the request's bytes, its metadata, its deadline) to
the real server, and the server's answer comes back unchanged (the response's bytes, or its
status with the trailing metadata that carries the error details). The metadata each call
arrived with is recorded: what a client sends on the wire between two processes, observed
where a network hop (a proxy, a load balancer) would see it. Nothing of memsvc runs here;
the real server answers every call.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc

# Set by the gRPC runtime on every call; not the client's own metadata.
_TRANSPORT_KEYS = {"user-agent", "grpc-accept-encoding", "grpc-timeout"}


@dataclass(frozen=True)
class Call:
    method: str
    metadata: dict[str, str]


class RecordingHop(grpc.GenericRpcHandler):
    def __init__(self, target: str):
        self._lock = threading.Lock()
        self._calls: list[Call] = []
        self._channel = grpc.insecure_channel(target)
        self._server = grpc.server(ThreadPoolExecutor(max_workers=4), handlers=[self])
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()

    @property
    def calls(self) -> list[Call]:
        with self._lock:
            return list(self._calls)

    def clear(self) -> None:
        with self._lock:
            self._calls.clear()

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method = handler_call_details.method

        def forward(request: bytes, context: grpc.ServicerContext) -> Any:
            metadata = tuple((key, value) for key, value in context.invocation_metadata() if key not in _TRANSPORT_KEYS)
            with self._lock:
                self._calls.append(Call(method, {key: value for key, value in metadata if isinstance(value, str)}))
            try:
                return self._channel.unary_unary(method)(request, metadata=metadata, timeout=context.time_remaining())
            except grpc.RpcError as err:
                context.set_trailing_metadata(err.trailing_metadata() or ())
                context.abort(err.code(), err.details() or "")

        return grpc.unary_unary_rpc_method_handler(forward)

    def stop(self) -> None:
        self._server.stop(grace=1).wait()
        self._channel.close()
