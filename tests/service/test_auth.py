"""Bearer-token auth on every RPC but health and reflection; safe-bind rules."""

from __future__ import annotations

import subprocess
import sys

import grpc
import pytest
from conftest import make_config, start_server
from grpc_health.v1 import health_pb2, health_pb2_grpc

from memsvc.config import Config, ConfigError
from memsvc.server import SERVICE_NAMES
from memsvc.v1 import engine_pb2, memory_pb2, settings_pb2

TOKEN = "s3cret-token"
MODULES = {
    "memsvc.v1.MemoryService": memory_pb2,
    "memsvc.v1.EngineService": engine_pb2,
    "memsvc.v1.SettingsService": settings_pb2,
}


def _all_methods():
    for service in SERVICE_NAMES:
        descriptor = MODULES[service].DESCRIPTOR.services_by_name[service.rsplit(".", 1)[1]]
        for method in descriptor.methods:
            yield f"/{service}/{method.name}", method.server_streaming


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    handle = start_server(make_config(tmp_path_factory.mktemp("auth"), api_tokens=("other-token", TOKEN)))
    yield handle
    handle.stop()


def _call(channel: grpc.Channel, path: str, streaming: bool, metadata=()) -> grpc.StatusCode:
    """Send an empty request; return the status code the server answered with."""
    kwargs = dict(request_serializer=lambda b: b, response_deserializer=lambda b: b)
    try:
        if streaming:
            list(channel.unary_stream(path, **kwargs)(b"", metadata=metadata, timeout=10))
        else:
            channel.unary_unary(path, **kwargs)(b"", metadata=metadata, timeout=10)
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


@pytest.mark.parametrize(
    "metadata",
    [(), (("authorization", "Bearer wrong"),), (("authorization", TOKEN),), (("authorization", f"Basic {TOKEN}"),)],
    ids=["no-token", "wrong-token", "no-scheme", "basic-scheme"],
)
def test_every_rpc_requires_a_valid_token(secured, metadata):
    channel = secured.channel()
    codes = {path: _call(channel, path, streaming, metadata) for path, streaming in _all_methods()}
    assert len(codes) == 37  # 17 memory + 8 engine + 12 settings RPCs
    assert set(codes.values()) == {grpc.StatusCode.UNAUTHENTICATED}, codes


def test_the_right_token_passes(secured):
    channel = secured.channel()
    codes = {
        path: _call(channel, path, streaming, (("authorization", f"Bearer {TOKEN}"),))
        for path, streaming in _all_methods()
    }
    assert grpc.StatusCode.UNAUTHENTICATED not in codes.values()
    assert codes["/memsvc.v1.MemoryService/ListMemories"] == grpc.StatusCode.OK
    assert codes["/memsvc.v1.MemoryService/CheckHealth"] == grpc.StatusCode.OK
    assert (
        _call(channel, "/memsvc.v1.MemoryService/ListMemories", False, (("authorization", "bearer other-token"),))
        == grpc.StatusCode.OK
    )


def test_health_and_reflection_need_no_token(secured):
    channel = secured.channel()
    stub = health_pb2_grpc.HealthStub(channel)
    assert stub.Check(health_pb2.HealthCheckRequest()).status == health_pb2.HealthCheckResponse.SERVING
    for name in SERVICE_NAMES:
        assert stub.Check(health_pb2.HealthCheckRequest(service=name)).status == health_pb2.HealthCheckResponse.SERVING


def test_no_token_configured_means_open_on_loopback(server):
    assert _call(server.channel(), "/memsvc.v1.MemoryService/ListMemories", False) == grpc.StatusCode.OK


@pytest.mark.parametrize(
    "overrides", [{"grpc_host": "0.0.0.0"}, {"grpc_host": "192.0.2.10"}, {"rest_host": "0.0.0.0"}, {"grpc_host": "::"}]
)
def test_non_loopback_bind_without_tokens_is_refused(overrides):
    with pytest.raises(ConfigError, match="MEMSVC_API_TOKENS"):
        Config(**overrides).validate()
    Config(**overrides, api_tokens=("t",)).validate()


def test_rest_host_is_irrelevant_without_the_gateway():
    Config(rest_host="0.0.0.0", gateway=False).validate()


def test_serve_refuses_to_start_on_a_public_address(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "memsvc",
            "serve",
            "--grpc-host",
            "0.0.0.0",
            "--grpc-port",
            "0",
            "--no-gateway",
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2
    assert "refusing to bind 0.0.0.0 without authentication" in result.stderr
    assert not (tmp_path / "memsvc.db").exists()


def test_a_method_taking_a_request_stream_is_refused_rather_than_passed_unchecked():
    """The rule table checks one request per call; a method taking a stream of requests (memsvc
    has none today) must be refused by the auth interceptor, never let through unchecked."""
    import asyncio
    import threading

    from memsvc.api.interceptors import AuthInterceptor

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="stream-auth-test", daemon=True)
    thread.start()

    async def boot():
        async def upload(requests, context):
            async for _ in requests:
                pass
            return b"stored"

        server = grpc.aio.server(interceptors=[AuthInterceptor((TOKEN,))])
        server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "test.Uploads", {"Upload": grpc.stream_unary_rpc_method_handler(upload)}
                ),
            )
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    server, port = asyncio.run_coroutine_threadsafe(boot(), loop).result(10)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            upload = channel.stream_unary(
                "/test.Uploads/Upload", request_serializer=lambda b: b, response_deserializer=lambda b: b
            )
            codes = []
            for metadata in ((), (("authorization", f"Bearer {TOKEN}"),)):
                try:
                    upload(iter([b"x"]), metadata=metadata, timeout=10)
                    codes.append(grpc.StatusCode.OK)
                except grpc.RpcError as err:
                    codes.append(err.code())
        assert codes == [grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED]
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
