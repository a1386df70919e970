"""The MCP server's channel to memsvc's gRPC API, which forwards each caller's credential.

One channel serves every caller; the credential travels per call as metadata, so two HTTP
clients with different tokens never share one (and the stdio server, which has one caller,
sends that caller's token from its environment). The trace context of the MCP request a call
serves travels the same way (memsvc.mcp.trace).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from memsvc.mcp.errors import tool_error
from memsvc.mcp.trace import trace_metadata
from memsvc.v1 import credentials_pb2_grpc, engine_pb2_grpc, memory_pb2_grpc

CALL_TIMEOUT_S = 30.0


class Upstream:
    """Async stubs of the memory, engine and credential services on one channel to `address`."""

    def __init__(self, address: str, max_message_bytes: int = 16 * 1024 * 1024):
        self.address = address
        self._channel = grpc.aio.insecure_channel(
            address,
            options=[
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.max_send_message_length", max_message_bytes),
            ],
        )
        self.memory = memory_pb2_grpc.MemoryServiceStub(self._channel)
        self.engine = engine_pb2_grpc.EngineServiceStub(self._channel)
        self.credentials = credentials_pb2_grpc.CredentialServiceStub(self._channel)

    async def call(self, method: Callable[..., Awaitable[Any]], request: Any, authorization: str | None) -> Any:
        """One RPC with the caller's `authorization` value (as sent: `Bearer <token>`) and
        the current trace context; a failed RPC becomes a tool error carrying the server's
        reason."""
        metadata = ((("authorization", authorization),) if authorization else ()) + trace_metadata()
        try:
            return await method(request, metadata=metadata, timeout=CALL_TIMEOUT_S)
        except grpc.RpcError as err:
            raise tool_error(err, self.address) from None

    async def close(self) -> None:
        await self._channel.close()


def bearer(token: str | None) -> str | None:
    """The authorization value for a token taken from configuration."""
    return f"Bearer {token}" if token else None


def rest_json(message: Message, **extra: Any) -> str:
    """The REST API's JSON of `message`: empty lists and zeros included, so an agent sees
    `"memories": []` rather than a missing field; `extra` fields are added after it."""
    fields = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
    return json.dumps({**fields, **extra}, ensure_ascii=False, indent=1)
