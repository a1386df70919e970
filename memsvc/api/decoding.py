"""Requests that cannot be decoded become INVALID_ARGUMENT, after authentication.

gRPC decodes a request before any interceptor's behaviour runs; a decoder that raises ends
the call as UNKNOWN and grpc logs an error with a traceback, so bytes that are not a valid
message (garbage, a truncated varint, a string field that is not UTF-8, a Struct nested past
the decoder's depth limit) would let any anonymous client fill the error log.
`DecodingInterceptor` swaps each method's decoder for one that returns an `Undecodable`
instead of raising. The behaviours outside it run first (authentication refuses a missing
token without looking at the request); the innermost behaviour then answers INVALID_ARGUMENT
naming the offending field, through the one error mapping, like any validation failure.

Anything that reads a request before the servicer (an access rule that looks at a tenant
field, say) must check `is_undecodable(request)` first.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import grpc
from google.protobuf.message import DecodeError

from memsvc.api.convert import TOO_DEEP
from memsvc.api.errors import abort
from memsvc.kernel.errors import FieldViolation, ValidationError

if TYPE_CHECKING:
    from memsvc.api.grpc_types import Context, Continuation, Handler

# What the protobuf decoder says (after "Error parsing message with type 'X': "), in words a
# client can act on.
_PROBLEMS = (("UTF-8", "is not valid UTF-8"), ("MaxDepth", TOO_DEEP), ("recursion", TOO_DEEP))


@dataclass(frozen=True)
class Undecodable:
    """Stands in for a request whose bytes are not a valid message; carries the refusal."""

    error: ValidationError


def is_undecodable(request: Any) -> bool:
    return isinstance(request, Undecodable)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos


def _records(data: bytes) -> Iterator[tuple[int, bytes]]:
    """Splits a message into its top-level fields (number, encoded record); raises
    ValueError where the framing itself is broken."""
    pos = 0
    while pos < len(data):
        start = pos
        tag, pos = _varint(data, pos)
        wire = tag & 7
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            pos += length
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError("unsupported wire type")
        if pos > len(data) or tag >> 3 == 0:
            raise ValueError("truncated field")
        yield tag >> 3, data[start:pos]


def _problem(exc: Exception) -> str:
    text = str(exc)
    return next((words for marker, words in _PROBLEMS if marker in text), "is corrupt or truncated protobuf")


def _refusal(message_class: Any, data: bytes, exc: DecodeError) -> ValidationError:
    """Names the top-level field whose bytes do not decode (each field is decoded alone),
    or says the message as a whole is malformed."""
    descriptor = message_class.DESCRIPTOR
    try:
        for number, record in _records(data):
            try:
                message_class.FromString(record)
            except DecodeError as field_exc:
                field = descriptor.fields_by_number.get(number)
                name = field.json_name if field is not None else f"field {number}"
                return ValidationError.single(name, _problem(field_exc))
    except ValueError:
        pass
    problem = _problem(exc)
    return ValidationError(
        FieldViolation("", problem), message=f"the request is not a valid {descriptor.full_name}: it {problem}"
    )


def tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """The method's decoder, returning an `Undecodable` where it would raise DecodeError."""
    message_class = getattr(deserializer, "__self__", None)
    if deserializer is None or not hasattr(message_class, "DESCRIPTOR"):
        return deserializer

    def decode(data: bytes) -> Any:
        try:
            return deserializer(data)
        except DecodeError as exc:
            return Undecodable(_refusal(message_class, data, exc))

    return decode


def _guard(behavior: Callable[..., Any], prepare: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    """`behavior` with `prepare(request, context)` awaited first; keeps its style (an async
    generator, or a coroutine that writes its responses itself), which grpc tells apart."""
    if inspect.isasyncgenfunction(behavior):

        async def generator(request: Any, context: Context) -> AsyncIterator[Any]:
            request = await prepare(request, context)
            async for item in behavior(request, context):
                yield item

        return generator

    async def coroutine(request: Any, context: Context) -> Any:
        return await behavior(await prepare(request, context), context)

    return coroutine


def _own(behavior: Callable[..., Any] | None) -> Callable[..., Any]:
    """A handler's behaviour of its own kind, which is set (types-grpcio types all four as
    optional, and for the synchronous server)."""
    return cast("Callable[..., Any]", behavior)


def _rebuilt(handler: Handler, method: str) -> Handler:
    async def refuse(request: Any, context: Context) -> Any:
        if isinstance(request, Undecodable):
            await abort(context, request.error, method)
        return request

    async def checked(requests: AsyncIterator[Any], context: Context) -> AsyncIterator[Any]:
        async def each() -> AsyncIterator[Any]:
            async for request in requests:
                yield await refuse(request, context)

        return each()

    decode, encode = tolerant(handler.request_deserializer), handler.response_serializer
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(_guard(_own(handler.stream_stream), checked), decode, encode)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(_guard(_own(handler.stream_unary), checked), decode, encode)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(_guard(_own(handler.unary_stream), refuse), decode, encode)
    return grpc.unary_unary_rpc_method_handler(_guard(_own(handler.unary_unary), refuse), decode, encode)


class DecodingInterceptor(grpc.aio.ServerInterceptor):
    """Innermost interceptor: every method (health and reflection included) decodes
    tolerantly and refuses an undecodable request once the outer behaviours let it through."""

    async def intercept_service(self, continuation: Continuation, details: grpc.HandlerCallDetails) -> Handler | None:
        handler = await continuation(details)
        return None if handler is None else _rebuilt(handler, details.method)
