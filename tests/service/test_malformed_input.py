"""Bytes that are not a valid request message, and free-form JSON nested too deep.

An undecodable request is UNAUTHENTICATED without a valid token and INVALID_ARGUMENT with
one (or with authentication off), naming the field when one field is at fault; it never
reaches the error log. JSON values (metadata, settings, chat bodies) may nest objects and
arrays at most 32 levels deep; deeper is INVALID_ARGUMENT naming the field, and nothing is
stored.
"""

from __future__ import annotations

import logging

import grpc
import pytest
from conftest import make_config, start_server
from grpc_health.v1 import health_pb2

from memsvc.api.convert import dict_to_struct
from memsvc.v1 import engine_pb2, memory_pb2
from tests.support.rpc_errors import error, violated_fields

TOKEN = "malformed-token"
BEARER = (("authorization", f"Bearer {TOKEN}"),)
RAW = dict(request_serializer=lambda b: b, response_deserializer=lambda b: b)
# (what it is, bytes): each fails protobuf decoding for every memsvc request type.
UNDECODABLE = [
    ("garbage", b"\xff\xff\xff\xff"),
    ("truncated-varint", b"\x08\x80"),
    ("truncated-length", b"\x0a\x05ab"),
    ("end-group-tag", b"\x0c"),
]
# field 1 is a string in each of these requests; the bytes are not UTF-8
BAD_UTF8 = b"\x0a\x02\xff\xfe"
UTF8_FIELDS = {
    "/memsvc.v1.MemoryService/ListMemories": "apiKeyId",
    "/memsvc.v1.MemoryService/GetMemory": "id",
    "/memsvc.v1.EngineService/Retrieve": "apiKeyId",
}
UNARY = (
    "/memsvc.v1.MemoryService/ListMemories",
    "/memsvc.v1.MemoryService/CreateMemory",
    "/memsvc.v1.MemoryService/GetMemory",
    "/memsvc.v1.EngineService/Retrieve",
    "/memsvc.v1.SettingsService/UpdateMemorySettings",
)
STREAM = "/memsvc.v1.EngineService/Reindex"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    handle = start_server(make_config(tmp_path_factory.mktemp("malformed"), api_tokens=(TOKEN,)))
    yield handle
    handle.stop()


def _raw_code(channel: grpc.Channel, path: str, payload: bytes, metadata=(), stream: bool = False):
    """The status a raw payload ends with, and the error (None when it succeeded)."""
    try:
        if stream:
            list(channel.unary_stream(path, **RAW)(payload, metadata=metadata, timeout=10))
        else:
            channel.unary_unary(path, **RAW)(payload, metadata=metadata, timeout=10)
    except grpc.RpcError as err:
        return err.code(), err
    return grpc.StatusCode.OK, None


def _errors_logged(caplog) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


@pytest.mark.parametrize(
    "payload", [p for _, p in UNDECODABLE] + [BAD_UTF8], ids=[n for n, _ in UNDECODABLE] + ["bad-utf8"]
)
def test_undecodable_request_without_a_token_is_unauthenticated(secured, caplog, payload):
    channel = secured.channel()
    codes = {path: _raw_code(channel, path, payload)[0] for path in UNARY}
    codes[STREAM] = _raw_code(channel, STREAM, payload, stream=True)[0]
    assert set(codes.values()) == {grpc.StatusCode.UNAUTHENTICATED}, codes
    assert _errors_logged(caplog) == []


@pytest.mark.parametrize("payload", [p for _, p in UNDECODABLE], ids=[n for n, _ in UNDECODABLE])
def test_undecodable_request_with_a_token_is_invalid_argument(secured, caplog, payload):
    channel = secured.channel()
    for path in (*UNARY, STREAM):
        code, err = _raw_code(channel, path, payload, BEARER, stream=path == STREAM)
        assert code is grpc.StatusCode.INVALID_ARGUMENT, (path, code)
        assert "is not a valid memsvc.v1." in err.details() and "DecodeError" not in err.details()
    assert _errors_logged(caplog) == []


@pytest.mark.parametrize("path", sorted(UTF8_FIELDS))
def test_invalid_utf8_names_the_field(secured, caplog, path):
    code, err = _raw_code(secured.channel(), path, BAD_UTF8, BEARER)
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert violated_fields(err) == {UTF8_FIELDS[path]}
    assert err.details() == f"{UTF8_FIELDS[path]}: is not valid UTF-8"
    assert _errors_logged(caplog) == []


def test_undecodable_request_with_auth_off_is_invalid_argument(server, caplog):
    code, err = _raw_code(server.channel(), "/memsvc.v1.MemoryService/ListMemories", BAD_UTF8)
    assert code is grpc.StatusCode.INVALID_ARGUMENT and violated_fields(err) == {"apiKeyId"}
    assert _errors_logged(caplog) == []


@pytest.mark.parametrize(
    "path,stream", [("/grpc.health.v1.Health/Check", False), ("/grpc.health.v1.Health/Watch", True)]
)
def test_health_refuses_undecodable_requests_quietly(secured, caplog, path, stream):
    code, _ = _raw_code(secured.channel(), path, b"\xff\xff", stream=stream)
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert _errors_logged(caplog) == []
    # and still answers a well-formed request
    reply = secured.channel().unary_unary(path.replace("Watch", "Check"), **RAW)(
        health_pb2.HealthCheckRequest().SerializeToString(), timeout=10
    )
    assert health_pb2.HealthCheckResponse.FromString(reply).status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_refuses_undecodable_requests_quietly(secured, caplog):
    call = secured.channel().stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", **RAW)
    with pytest.raises(grpc.RpcError) as info:
        list(call(iter([b"\xff\xff"]), timeout=10))
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert _errors_logged(caplog) == []


# ---- depth ----


def _nested(depth: int, arrays: bool = False):
    """`depth` levels of objects (or arrays inside one object) around a number."""
    value: object = 1
    for _ in range(depth if not arrays else depth - 1):
        value = [value] if arrays else {"a": value}
    return {"a": value} if arrays else value


def test_metadata_32_levels_deep_is_stored_and_read_back(server, stubs):
    metadata = _nested(32)
    created = stubs.memory.CreateMemory(
        memory_pb2.CreateMemoryRequest(api_key_id="deep", content="c", metadata=dict_to_struct(metadata))
    )
    got = stubs.memory.GetMemory(memory_pb2.GetMemoryRequest(id=created.id))
    listed = stubs.memory.ListMemories(memory_pb2.ListMemoriesRequest(api_key_id="deep"))
    assert got.metadata == dict_to_struct(metadata) and listed.data[0].metadata == dict_to_struct(metadata)


def _with_json(message, field: str, value) -> bytes:
    """`message` encoded with `value` as its Struct `field`, built by hand: the protobuf
    runtime itself refuses to copy a Struct nested past its depth limit into a message."""
    number = message.DESCRIPTOR.fields_by_name[field].number
    struct = dict_to_struct(value).SerializeToString()
    return message.SerializeToString() + _varint(number << 3 | 2) + _varint(len(struct)) + struct


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _raw(server, path: str):
    return server.channel().unary_unary(path, **RAW)


@pytest.mark.parametrize(
    "depth,arrays", [(33, False), (34, False), (60, False), (99, False), (33, True), (49, True), (60, True)]
)
def test_metadata_deeper_than_32_levels_is_invalid_argument(server, stubs, caplog, depth, arrays):
    request = _with_json(
        memory_pb2.CreateMemoryRequest(api_key_id="deep", content="c"), "metadata", _nested(depth, arrays)
    )
    err = error(_raw(server, "/memsvc.v1.MemoryService/CreateMemory"), request)
    assert err.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert violated_fields(err) == {"metadata"} and "32 levels" in err.details(), err.details()
    assert stubs.memory.ListMemories(memory_pb2.ListMemoriesRequest(api_key_id="deep")).total == 0
    assert _errors_logged(caplog) == []


def test_update_and_inject_refuse_too_deep_json(server, stubs):
    created = stubs.memory.CreateMemory(memory_pb2.CreateMemoryRequest(api_key_id="deep", content="c"))
    for depth in (33, 40):  # refused after decoding, and by the decoder
        update = _with_json(memory_pb2.UpdateMemoryRequest(id=created.id), "metadata", _nested(depth))
        err = error(_raw(server, "/memsvc.v1.MemoryService/UpdateMemory"), update)
        assert err.code() is grpc.StatusCode.INVALID_ARGUMENT and violated_fields(err) == {"metadata"}
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "extra": _nested(depth - 1)}
        inject = _with_json(engine_pb2.InjectRequest(api_key_id="deep"), "request", body)
        err = error(_raw(server, "/memsvc.v1.EngineService/Inject"), inject)
        assert err.code() is grpc.StatusCode.INVALID_ARGUMENT and violated_fields(err) == {"request"}
    assert stubs.memory.GetMemory(memory_pb2.GetMemoryRequest(id=created.id)).metadata == dict_to_struct({})
