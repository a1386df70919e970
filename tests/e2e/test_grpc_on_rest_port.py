"""gRPC and gRPC-Web on the REST port: Envoy passes them to memsvc's gRPC server through the
same filters as REST (the Host/Origin guard, the token check in the server), so a client that
can reach only the REST port (one port through a proxy, a browser with gRPC-Web) is served.
Generated stubs against the real Envoy; every call has a deadline, so a hang fails."""

from __future__ import annotations

import http.client
import struct
import uuid
from collections.abc import Iterator
from dataclasses import replace

import grpc
import pytest
from conftest import ServerHandle, free_port, make_config, start_server
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.gateway.launcher import Gateway
from memsvc.v1 import credentials_pb2, credentials_pb2_grpc, memory_pb2, memory_pb2_grpc

pytestmark = pytest.mark.e2e
TOKEN = "tok-grpc-rest"
DEADLINE_S = 15  # a call that hangs fails with DEADLINE_EXCEEDED instead of blocking the run


class Stack:
    def __init__(self, handle: ServerHandle):
        self.handle = handle
        self.gateway = Gateway.for_config(replace(handle.config, rest_port=free_port()), grpc_port=handle.port)
        self.rest_port = self.gateway.start()

    def channel(self, token: str | None = TOKEN) -> grpc.Channel:
        channel = grpc.insecure_channel(f"127.0.0.1:{self.rest_port}")
        if token is None:
            return channel
        return grpc.intercept_channel(channel, _Bearer(token))

    def stop(self) -> None:
        self.gateway.stop()
        self.handle.stop()


class _Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    def __init__(self, token: str):
        self.metadata = (("authorization", f"Bearer {token}"),)

    def _with_token(self, details):
        return details._replace(metadata=tuple(details.metadata or ()) + self.metadata)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._with_token(details), request)


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[Stack]:
    handle = start_server(make_config(tmp_path_factory.mktemp("grpc-rest"), api_tokens=(TOKEN,)))
    result = Stack(handle)
    yield result
    result.stop()


def test_unary_calls_through_the_rest_port_are_answered(stack: Stack):
    owner = f"grpc-rest-{uuid.uuid4().hex[:8]}"
    with stack.channel() as channel:
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        created = stub.CreateMemory(
            memory_pb2.CreateMemoryRequest(api_key_id=owner, content="likes tea"), timeout=DEADLINE_S
        )
        listed = stub.ListMemories(memory_pb2.ListMemoriesRequest(api_key_id=owner), timeout=DEADLINE_S)
        assert [m.id for m in listed.data] == [created.id]
        assert stub.GetMemory(memory_pb2.GetMemoryRequest(id=created.id), timeout=DEADLINE_S).content == "likes tea"
    # The same memory through the gRPC port: one service behind both.
    direct = memory_pb2_grpc.MemoryServiceStub(stack.handle.channel(TOKEN))
    assert direct.ListMemories(memory_pb2.ListMemoriesRequest(api_key_id=owner), timeout=DEADLINE_S).total == 1


def test_the_token_is_checked_as_on_the_grpc_port(stack: Stack):
    with stack.channel(token=None) as channel:
        with pytest.raises(grpc.RpcError) as missing:
            memory_pb2_grpc.MemoryServiceStub(channel).ListMemories(
                memory_pb2.ListMemoriesRequest(api_key_id="anyone"), timeout=DEADLINE_S
            )
        assert missing.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with stack.channel(token="wrong") as channel:
        with pytest.raises(grpc.RpcError) as wrong:
            memory_pb2_grpc.MemoryServiceStub(channel).ListMemories(
                memory_pb2.ListMemoriesRequest(api_key_id="anyone"), timeout=DEADLINE_S
            )
        assert wrong.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with stack.channel() as channel:
        caller = credentials_pb2_grpc.CredentialServiceStub(channel).GetCaller(
            credentials_pb2.GetCallerRequest(), timeout=DEADLINE_S
        )
        assert caller.auth_required and "admin" in caller.credential.permissions, caller


def test_an_error_status_comes_back_as_the_server_sent_it(stack: Stack):
    with stack.channel() as channel:
        with pytest.raises(grpc.RpcError) as missing:
            memory_pb2_grpc.MemoryServiceStub(channel).GetMemory(
                memory_pb2.GetMemoryRequest(id="no-such-id"), timeout=DEADLINE_S
            )
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_server_stream_through_the_rest_port_streams(stack: Stack):
    """grpc.health.v1 Watch sends the current status at once and then stays open: it must
    arrive through Envoy (no buffering of the response, no hang)."""
    with stack.channel() as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=DEADLINE_S)
        first = next(watch)
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()


def _grpc_web_frame(message: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", len(message)) + message


def _grpc_web_frames(body: bytes) -> list[tuple[int, bytes]]:
    frames, at = [], 0
    while at < len(body):
        flag, size = body[at], struct.unpack(">I", body[at + 1 : at + 5])[0]
        frames.append((flag, body[at + 5 : at + 5 + size]))
        at += 5 + size
    return frames


def _grpc_web_call(
    stack: Stack, path: str, request: bytes, token: str | None = TOKEN, headers: dict[str, str] | None = None
) -> tuple[int, str, list[tuple[int, bytes]]]:
    """(HTTP status, grpc-status, frames): the status is in the trailer frame, or in the
    headers of a trailers-only answer."""
    conn = http.client.HTTPConnection("127.0.0.1", stack.rest_port, timeout=DEADLINE_S)
    try:
        sent = {"content-type": "application/grpc-web+proto", "x-grpc-web": "1", **(headers or {})}
        if token:
            sent["authorization"] = f"Bearer {token}"
        conn.request("POST", path, body=_grpc_web_frame(request), headers=sent)
        response = conn.getresponse()
        frames = _grpc_web_frames(response.read())
        trailers = [payload for flag, payload in frames if flag & 0x80]
        if trailers:
            lines = dict(line.split(":", 1) for line in trailers[0].decode().strip().split("\r\n"))
            grpc_status = lines["grpc-status"].strip()
        else:
            grpc_status = response.getheader("grpc-status")
        return response.status, grpc_status, frames
    finally:
        conn.close()


def test_grpc_web_as_a_browser_sends_it_is_answered(stack: Stack):
    owner = f"grpc-web-{uuid.uuid4().hex[:8]}"
    memory_pb2_grpc.MemoryServiceStub(stack.handle.channel(TOKEN)).CreateMemory(
        memory_pb2.CreateMemoryRequest(api_key_id=owner, content="plays chess"), timeout=DEADLINE_S
    )
    status, grpc_status, frames = _grpc_web_call(
        stack,
        "/memsvc.v1.MemoryService/ListMemories",
        memory_pb2.ListMemoriesRequest(api_key_id=owner).SerializeToString(),
    )
    assert (status, grpc_status) == (200, "0"), frames
    [message] = [payload for flag, payload in frames if not flag & 0x80]
    assert [m.content for m in memory_pb2.ListMemoriesResponse.FromString(message).data] == ["plays chess"]

    status, grpc_status, frames = _grpc_web_call(
        stack,
        "/memsvc.v1.MemoryService/ListMemories",
        memory_pb2.ListMemoriesRequest(api_key_id=owner).SerializeToString(),
        token=None,
    )
    assert grpc_status == str(grpc.StatusCode.UNAUTHENTICATED.value[0]), (status, frames)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
@pytest.mark.parametrize("ctype", ["application/grpc", "application/grpc-web"])
def test_a_grpc_request_that_is_not_a_post_is_unimplemented_at_once(stack: Stack, method, ctype):
    """memsvc's gRPC server failed it with INTERNAL or reset the stream (a 503)."""
    conn = http.client.HTTPConnection("127.0.0.1", stack.rest_port, timeout=DEADLINE_S)
    try:
        conn.request(method, "/memsvc.v1.MemoryService/ListMemories", headers={"content-type": ctype})
        response = conn.getresponse()
        response.read()
    finally:
        conn.close()
    assert response.status < 500 and response.getheader("grpc-status") == str(grpc.StatusCode.UNIMPLEMENTED.value[0])
    assert "a gRPC call is a POST request" in response.getheader("grpc-message")


def test_a_rest_request_that_claims_grpc_web_stays_a_rest_request(stack: Stack):
    """gRPC-Web is turned on only for gRPC paths: a REST GET with that content type is
    transcoded like any other, not turned into a gRPC call the server cannot take."""
    conn = http.client.HTTPConnection("127.0.0.1", stack.rest_port, timeout=DEADLINE_S)
    try:
        conn.request(
            "GET",
            "/api/memory?apiKeyId=anyone",
            headers={"content-type": "application/grpc-web", "authorization": f"Bearer {TOKEN}"},
        )
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    assert response.status == 200 and b'"data"' in body, body
