"""The operator CLI's gRPC client: a channel to a running server that sends the bearer token
of MEMSVC_API_TOKENS, and errors turned into one clear line instead of a traceback."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from memsvc.config import Config
from memsvc.v1 import engine_pb2_grpc, memory_pb2_grpc, settings_pb2_grpc

EXIT_RPC_ERROR = 1
EXIT_UNREACHABLE = 3
EXIT_UNAUTHENTICATED = 4


class ClientError(Exception):
    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def server_address(config: Config, override: str | None = None) -> str:
    """Where the CLI connects: --server, else the configured gRPC port on loopback (a
    wildcard bind is reached through loopback)."""
    if override:
        return override
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(config.grpc_host, config.grpc_host)
    return f"[{host}]:{config.grpc_port}" if ":" in host else f"{host}:{config.grpc_port}"


@dataclass
class Client:
    address: str
    channel: grpc.Channel
    memory: memory_pb2_grpc.MemoryServiceStub
    engine: engine_pb2_grpc.EngineServiceStub
    settings: settings_pb2_grpc.SettingsServiceStub
    metadata: Sequence[tuple[str, str]]
    timeout_s: float = 30.0

    @classmethod
    def connect(cls, config: Config, address: str | None = None) -> Client:
        target = server_address(config, address)
        channel = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", config.max_message_bytes)])
        token = config.api_tokens[0] if config.api_tokens else None
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        return cls(
            target,
            channel,
            memory_pb2_grpc.MemoryServiceStub(channel),
            engine_pb2_grpc.EngineServiceStub(channel),
            settings_pb2_grpc.SettingsServiceStub(channel),
            metadata,
        )

    def call(self, method: Callable[..., Any], request: Any) -> Any:
        try:
            return method(request, metadata=self.metadata, timeout=self.timeout_s)
        except grpc.RpcError as err:
            raise self.explain(err) from None

    def stream(self, method: Callable[..., Any], request: Any):
        """Yields the messages of a server stream (no deadline: a reindex may run long)."""
        try:
            yield from method(request, metadata=self.metadata)
        except grpc.RpcError as err:
            raise self.explain(err) from None

    def explain(self, err: grpc.RpcError) -> ClientError:
        code = err.code()
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and _is_connection_failure(err):
            return ClientError(
                f"cannot reach memsvc at {self.address}: is `memsvc serve` running there?", EXIT_UNREACHABLE
            )
        if code is grpc.StatusCode.UNAUTHENTICATED:
            hint = (
                "the token in MEMSVC_API_TOKENS was refused"
                if self.metadata
                else "the server requires a token: set MEMSVC_API_TOKENS"
            )
            return ClientError(f"not authorized: {hint}", EXIT_UNAUTHENTICATED)
        return ClientError(f"{code.name}: {err.details()}", EXIT_RPC_ERROR)

    def close(self) -> None:
        self.channel.close()


def _is_connection_failure(err: grpc.RpcError) -> bool:
    details = (err.details() or "").lower()
    return any(
        word in details for word in ("connect", "unavailable", "connection refused", "failed to connect", "deadline")
    )


def client_options(parser: argparse.ArgumentParser, *, nested: bool = False) -> None:
    """The options every client command takes: where the server is. A nested parser (the
    `list` of `memories list`) takes them too, so they work before and after the action;
    there they default to SUPPRESS, so an option given before the action is not reset."""
    default = argparse.SUPPRESS if nested else None
    parser.add_argument(
        "--server",
        metavar="HOST:PORT",
        default=default,
        help="address of the running server (default: 127.0.0.1 and the gRPC port below)",
    )
    parser.add_argument(
        "--grpc-host",
        dest="grpc_host",
        metavar="HOST",
        default=default,
        help="host of the server when --server is not given; a wildcard bind is reached on "
        "loopback [MEMSVC_GRPC_HOST, default 127.0.0.1]",
    )
    parser.add_argument(
        "--grpc-port",
        dest="grpc_port",
        metavar="PORT",
        default=default,
        help="gRPC port of the server when --server is not given [MEMSVC_GRPC_PORT, default 50051]",
    )
