"""The grpc.aio types the servicers and interceptors share.

The aliases are for annotations only (`from __future__ import annotations` in every user):
grpc's runtime classes are not all subscriptable (RpcMethodHandler is not).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import grpc

    # A servicer's context: request and response types are the method's, so Any here.
    Context: TypeAlias = grpc.aio.ServicerContext[Any, Any]
    Handler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
    Continuation: TypeAlias = Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]]
    # What a grpc.aio method handler runs: a unary-unary method's coroutine function, a
    # unary-stream method's async generator function.
    UnaryBehavior: TypeAlias = Callable[[Any, Context], Awaitable[Any]]
    StreamBehavior: TypeAlias = Callable[[Any, Context], AsyncIterator[Any]]
