"""Robustness fuzzing of the gRPC surface against a real in-process server.

Three layers:

(a) Typed fuzzing: every implemented MemoryService RPC gets requests built from the generated
    message classes with hostile field values (NUL, control and astral characters, SQL and
    FTS syntax, empty and huge strings, int32 extremes, nested Struct metadata with NaN and
    infinities, Timestamps anywhere in the proto range). Whatever happens, the answer is a
    success or one of the contract's client-error codes; never INTERNAL, UNKNOWN,
    UNAVAILABLE or a transport-level failure. Successes are checked for round-trip fidelity.
(b) Wire fuzzing: every method of the three services (taken from the descriptors) gets
    arbitrary bytes as its serialized request. Bytes the request type cannot decode are a
    client error, INVALID_ARGUMENT (this server has no tokens; with tokens an unauthenticated
    caller gets UNAUTHENTICATED first), never UNKNOWN with a logged traceback; bytes that do
    decode are an ordinary request and must get an ordinary answer.
(c) After each fuzz run the server still works: CheckHealth reports working, ListMemories
    agrees with the table, `PRAGMA integrity_check` is ok and the FTS5 index matches its
    content table.

Plus deterministic regression tests for specific failures the fuzzers found, and two
concurrency properties (health probe, read cache) that sequential fuzzing cannot reach.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import apsw
import grpc
import pytest
from google.protobuf import json_format, struct_pb2, timestamp_pb2
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memsvc.kernel.models import MEMORY_TYPES
from memsvc.v1 import engine_pb2, settings_pb2
from memsvc.v1 import memory_pb2 as pb

C = grpc.StatusCode
CALL_TIMEOUT_S = 10.0
# What a client may legitimately see from the CRUD RPCs (the documented error statuses), besides OK.
ALLOWED = frozenset({C.INVALID_ARGUMENT, C.NOT_FOUND, C.ABORTED})
# What memsvc answers for request bytes the request type cannot decode (with auth off).
UNDECODABLE = frozenset({C.INVALID_ARGUMENT})
IMPLEMENTED = (
    "ListMemories",
    "CreateMemory",
    "ClearMemories",
    "GetMemory",
    "UpdateMemory",
    "DeleteMemory",
    "CheckHealth",
)
# Extra codes the contract documents for RPCs built later (engine, Qdrant): precondition
# failures and a dependency that is down. Only used for RPCs that are not IMPLEMENTED here.
LATER_ALLOWED = ALLOWED | {C.FAILED_PRECONDITION, C.UNAVAILABLE}

MIN_TS = -62135596800  # 0001-01-01T00:00:00Z
MAX_TS = 253402300799  # 9999-12-31T23:59:59Z
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def fuzz_settings(n: int) -> settings:
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# ---- strategies ------------------------------------------------------------------------------

SPECIAL_TEXT = [
    "",
    " ",
    "\t\r\n",
    "\x00",
    "a\x00b",
    "\x00" * 8,
    "\x7f\x1b[31m",
    "NULL",
    "null",
    "None",
    "factual",
    "FACTUAL",
    "semantic ",
    "__memsvc",
    "__memsvc_health__",
    "__extraction_test__",
    "%",
    "_",
    "%_%",
    "\\",
    "'",
    '"',
    "' OR 1=1 --",
    '"; DROP TABLE memories; --',
    "memory_fts",
    "content:x",
    "NEAR(a b)",
    "*",
    "a OR b",
    "\u202e\u200b\ufeff",
    "ß",
    "İ",
    "ﬁ",
    "🧠🧠🧠",
    "\ufffd",
    "\uffff",
    "\U0010ffff",
    "é" * 100,
    "a" * 256,
    "a" * 257,
    "a" * 512,
    "a" * 513,
    "🧠" * 512,
    "q" * 1024,
    "q" * 1025,
]
SMALL_TEXT = st.one_of(st.text(st.characters(codec="utf-8"), max_size=24), st.sampled_from(SPECIAL_TEXT[:40]))
# Up to 1 MB per string (250k astral characters), so a request stays far below the
# server's 16 MiB message limit even with several huge fields.
HUGE_TEXT = st.builds(
    lambda ch, n: ch * n,
    st.sampled_from(["a", "é", "🧠", "\x00", " ", "%"]),
    st.sampled_from([2048, 3000, 8 * 1024, 16 * 1024 + 1, 32 * 1024, 32 * 1024 + 1, 100_000, 250_000]),
)
TEXT = st.one_of(st.text(st.characters(codec="utf-8"), max_size=60), st.sampled_from(SPECIAL_TEXT), HUGE_TEXT)
INT32 = st.one_of(
    st.integers(INT32_MIN, INT32_MAX),
    st.sampled_from([INT32_MIN, INT32_MIN + 1, -1, 0, 1, 2, 50, 199, 200, 201, INT32_MAX - 1, INT32_MAX]),
)


def _optional(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), strategy)


OWNER = st.one_of(st.sampled_from(["fuzz-a", "fuzz-b", "fuzz-c"]), TEXT)
MEMORY_TYPE = st.one_of(st.sampled_from([*MEMORY_TYPES, ""]), TEXT)

JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**64), 2**64),
    SMALL_TEXT,
)
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(SMALL_TEXT, inner, max_size=4)),
    max_leaves=16,
)
METADATA_DICT = st.one_of(
    st.dictionaries(SMALL_TEXT, JSON_VALUE, max_size=6),
    # Around the 16 KiB serialized limit.
    st.builds(lambda n: {"blob": "m" * n}, st.sampled_from([100, 16 * 1024 - 11, 16 * 1024 - 10, 16 * 1024, 40_000])),
)


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


METADATA = METADATA_DICT.map(_struct)


def _ts(seconds: int, nanos: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)


# Anywhere in the valid proto range, plus near "now" so both past and future expiries occur.
TIMESTAMP = st.one_of(
    st.builds(_ts, st.integers(MIN_TS, MAX_TS), st.integers(0, 999_999_999)),
    st.builds(_ts, st.sampled_from([MIN_TS, MAX_TS, 0, -1]), st.sampled_from([0, 999_999_999])),
    st.builds(
        lambda delta, nanos: _ts(int(time.time()) + delta, nanos),
        st.integers(-3 * 86400, 3 * 86400),
        st.integers(0, 999_999_999),
    ),
)


class _Existing:
    """Sentinel: replaced at run time by the id of a freshly created memory."""

    def __repr__(self) -> str:
        return "EXISTING"


EXISTING = _Existing()
MEMORY_ID = st.one_of(st.just(EXISTING), st.just(EXISTING), TEXT)


def _message(cls, **fields: Any):
    """A request with only the fields that are not None set (presence matters)."""
    return cls(**{k: v for k, v in fields.items() if v is not None})


LIST_REQUEST = st.builds(
    lambda **f: _message(pb.ListMemoriesRequest, **f),
    api_key_id=_optional(OWNER),
    type=_optional(MEMORY_TYPE),
    session_id=_optional(TEXT),
    q=_optional(TEXT),
    limit=_optional(INT32),
    page=_optional(INT32),
    offset=_optional(INT32),
)
CREATE_REQUEST = st.builds(
    lambda **f: _message(pb.CreateMemoryRequest, **f),
    api_key_id=_optional(OWNER),
    session_id=_optional(TEXT),
    type=_optional(MEMORY_TYPE),
    key=_optional(st.one_of(st.sampled_from(["k1", "k2", "k3"]), TEXT)),
    content=_optional(st.one_of(SMALL_TEXT, TEXT)),
    metadata=_optional(METADATA),
    expires_at=_optional(TIMESTAMP),
)
CLEAR_REQUEST = st.builds(
    lambda **f: _message(pb.ClearMemoriesRequest, **f),
    api_key_id=_optional(OWNER),
    type=_optional(MEMORY_TYPE),
    session_id=_optional(TEXT),
    older_than=_optional(TIMESTAMP),
)
# The fields UpdateMemory must refuse (anything but type/key/content/metadata), sometimes set.
FORBIDDEN_UPDATE = st.fixed_dictionaries(
    {},
    optional={
        "api_key_id": TEXT,
        "session_id": TEXT,
        "expires_at": TIMESTAMP,
        "created_at": TIMESTAMP,
        "updated_at": TIMESTAMP,
        "access_count": INT32,
        "last_accessed_at": TIMESTAMP,
    },
)
UPDATE_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "type": MEMORY_TYPE,
        "key": st.one_of(st.sampled_from(["k1", "k2"]), TEXT),
        "content": st.one_of(SMALL_TEXT, TEXT),
        "metadata": METADATA,
    },
)


# ---- wire-level strategies ---------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    return _varint((number << 3) | wire_type) + payload


FIELD_NUMBER = st.one_of(st.integers(1, 16), st.sampled_from([17, 100, 2**29 - 1]))
PAYLOAD_TEXT = st.one_of(SMALL_TEXT.map(lambda s: s.encode("utf-8")), st.binary(max_size=16))


def _wire_message(children: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    one = st.one_of(
        st.builds(
            lambda n, v: _field(n, 0, _varint(v)),
            FIELD_NUMBER,
            st.one_of(
                st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 200, INT32_MAX, 2**32 - 1, 2**64 - 2**31, 2**64 - 1])
            ),
        ),
        st.builds(lambda n, b: _field(n, 1, b), FIELD_NUMBER, st.binary(min_size=8, max_size=8)),
        st.builds(lambda n, b: _field(n, 5, b), FIELD_NUMBER, st.binary(min_size=4, max_size=4)),
        st.builds(lambda n, b: _field(n, 2, _varint(len(b)) + b), FIELD_NUMBER, st.one_of(PAYLOAD_TEXT, children)),
    )
    return st.lists(one, max_size=6).map(b"".join)


# Well-formed protobuf wire data (nested length-delimited fields included, so Timestamps,
# Structs and Values with arbitrary contents reach the servicers), raw noise, and the
# wire data with a byte flipped or cut short.
WIRE = st.recursive(st.just(b""), _wire_message, max_leaves=12)
RAW_BYTES = st.one_of(
    WIRE,
    st.binary(max_size=300),
    st.builds(
        lambda b, i, x: b[: i % (len(b) + 1)] + bytes([x]) + b[i % (len(b) + 1) + 1 :],
        WIRE,
        st.integers(0, 10_000),
        st.integers(0, 255),
    ),
    st.builds(lambda b, i: b[: i % (len(b) + 1)], WIRE, st.integers(0, 10_000)),
)

# Every method of the three services, from the descriptors: (path, request class, streaming).
_MODULES = (pb, engine_pb2, settings_pb2)
METHODS: list[tuple[str, type, bool]] = []
for _module in _MODULES:
    for _service in _module.DESCRIPTOR.services_by_name.values():
        for _method in _service.methods:
            METHODS.append(
                (
                    f"/{_service.full_name}/{_method.name}",
                    getattr(_module, _method.input_type.name),
                    _method.server_streaming,
                )
            )
METHODS.sort()


# ---- helpers -----------------------------------------------------------------------------------


def call(fn: Callable, request: Any) -> tuple[Any, C | None, str]:
    """(response or None, error code or None, error details)."""
    try:
        return fn(request, timeout=CALL_TIMEOUT_S), None, ""
    except grpc.RpcError as err:
        return None, err.code(), err.details() or ""


def assert_allowed(code: C | None, details: str, request: Any) -> None:
    if code is not None:
        assert code in ALLOWED, f"{code.name}: {details[:300]!r} for {_describe(request)}"


def _describe(request: Any) -> str:
    text = f"{type(request).__name__}({request})"
    return text if len(text) < 600 else text[:600] + f"... ({len(text)} chars)"


def plain(message: Any) -> Any:
    """A Struct as plain JSON values, so numbers compare by value (-0.0 == 0)."""
    return json_format.MessageToDict(message)


def row_count(server) -> int:
    with server.app.database.read() as conn:
        return conn.execute("SELECT count(*) FROM memories").fetchall()[0][0]


def row_snapshot(server, memory_id: str) -> tuple | None:
    with server.app.database.read() as conn:
        rows = conn.execute(
            "SELECT type, key, content, metadata, session_id, expires_at, updated_at FROM memories WHERE id = ?",
            (memory_id,),
        ).fetchall()
    return tuple(rows[0]) if rows else None


def fts_integrity_check(db_path) -> None:
    """FTS5's own check; raises apsw.CorruptError when it fails. The plain form checks the
    index's structure only; rank = 1 also compares it with the external content table."""
    conn = apsw.Connection(str(db_path))
    try:
        conn.set_busy_timeout(10_000)
        conn.execute("INSERT INTO memory_fts(memory_fts) VALUES('integrity-check')")
        conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES('integrity-check', 1)")
    finally:
        conn.close()


def assert_server_healthy(server, stubs) -> None:
    health, code, details = call(stubs.memory.CheckHealth, pb.CheckHealthRequest())
    assert code is None, f"CheckHealth failed after fuzzing: {code} {details}"
    assert health.working, f"CheckHealth not working after fuzzing: {health.error}"
    # Default page size: 200 rows of 32 KiB content + 16 KiB metadata would not fit the
    # client's default 4 MiB receive limit.
    listing, code, details = call(stubs.memory.ListMemories, pb.ListMemoriesRequest())
    assert code is None, f"ListMemories failed after fuzzing: {code} {details}"
    assert listing.total == row_count(server)
    assert server.app.database.integrity_check() == "ok"
    fts_integrity_check(server.config.db_path)


def create_existing(stubs, content: str = "existing memory", **fields: Any) -> str:
    fields.setdefault("api_key_id", "fuzz-existing")
    return stubs.memory.CreateMemory(pb.CreateMemoryRequest(content=content, **fields), timeout=CALL_TIMEOUT_S).id


def _resolve(stubs, memory_id: Any) -> str:
    return create_existing(stubs) if memory_id is EXISTING else memory_id


# ---- (a) typed fuzzing of each implemented RPC ----------------------------------------------


def test_fuzz_list_memories(server, stubs):
    create_existing(stubs, "alpha beta", type="episodic", session_id="s1")
    create_existing(stubs, "ÄPFEL % _", key="k1")  # no NUL: refused by both stores (dialect.refuse_nul)

    @fuzz_settings(200)
    @given(request=LIST_REQUEST)
    def run(request):
        response, code, details = call(stubs.memory.ListMemories, request)
        assert_allowed(code, details, request)
        if response is None:
            return
        limit = request.limit if request.HasField("limit") else 50
        assert response.limit == limit and len(response.data) <= limit
        assert response.total >= len(response.data)
        assert sum(response.stats.by_type.values()) == response.total
        for memory in response.data:
            if request.api_key_id:
                assert memory.api_key_id == request.api_key_id
            if request.type:
                assert memory.type == request.type
            if request.session_id:
                assert memory.session_id == request.session_id

    run()
    assert_server_healthy(server, stubs)


def test_fuzz_create_memory(server, stubs):
    @fuzz_settings(250)
    @given(request=CREATE_REQUEST)
    def run(request):
        before = row_count(server)
        response, code, details = call(stubs.memory.CreateMemory, request)
        assert_allowed(code, details, request)
        if response is None:
            if code is C.INVALID_ARGUMENT:
                assert row_count(server) == before, "a refused create changed the table"
            return
        assert response.success and response.id
        assert row_count(server) == before + (1 if response.created else 0)
        stored, code, details = call(stubs.memory.GetMemory, pb.GetMemoryRequest(id=response.id))
        assert code is None, f"created {response.id} but GetMemory says {code}: {details}"
        if response.merged_into:  # a repeat of an earlier draft: that memory, of the same owner and type, stays
            assert response.merged_into == response.id and not response.created and not request.key
            assert (stored.api_key_id, stored.type) == (request.api_key_id, request.type or "factual")
            return
        # What was sent is what is stored: no truncation at NUL, no re-encoding.
        assert stored.content == request.content
        assert stored.api_key_id == request.api_key_id
        assert stored.type == (request.type or "factual")
        assert (stored.key if stored.HasField("key") else "") == request.key
        assert (stored.session_id if stored.HasField("session_id") else "") == request.session_id
        stored_metadata = plain(stored.metadata)
        for name, value in plain(request.metadata).items():  # merged on upsert: sent keys win
            assert stored_metadata.get(name) == value, f"metadata[{name!r}] changed in storage"
        if request.HasField("expires_at"):
            assert stored.expires_at.seconds == request.expires_at.seconds
            assert stored.expires_at.nanos // 1000 == request.expires_at.nanos // 1000

    run()
    assert_server_healthy(server, stubs)


def test_fuzz_clear_memories(server, stubs):
    @fuzz_settings(150)
    @given(request=CLEAR_REQUEST, seed=st.booleans())
    def run(request, seed):
        if seed and request.api_key_id:
            # Something to delete for this owner (when the owner is valid at all).
            call(
                stubs.memory.CreateMemory,
                pb.CreateMemoryRequest(
                    api_key_id=request.api_key_id,
                    content="to be cleared",
                    session_id=request.session_id or None,
                    type=request.type if request.type in MEMORY_TYPES else None,
                ),
            )
        before = row_count(server)
        response, code, details = call(stubs.memory.ClearMemories, request)
        assert_allowed(code, details, request)
        if response is None:
            assert row_count(server) == before, "a refused clear deleted rows"
            return
        assert response.success and 0 <= response.deleted_count <= before
        assert row_count(server) == before - response.deleted_count
        if not request.HasField("older_than"):
            left, code, details = call(
                stubs.memory.ListMemories,
                pb.ListMemoriesRequest(api_key_id=request.api_key_id, type=request.type, session_id=request.session_id),
            )
            assert code is None, f"{code}: {details}"
            assert left.total == 0, "ClearMemories left matching rows behind"

    run()
    assert_server_healthy(server, stubs)


def test_fuzz_get_memory(server, stubs):
    @fuzz_settings(150)
    @given(memory_id=MEMORY_ID)
    def run(memory_id):
        request = pb.GetMemoryRequest(id=_resolve(stubs, memory_id))
        response, code, details = call(stubs.memory.GetMemory, request)
        assert_allowed(code, details, request)
        if memory_id is EXISTING:
            assert code is None, f"an existing memory was not found: {code}"
            assert response.id == request.id and response.content == "existing memory"
        elif response is not None:
            assert response.id == request.id

    run()
    assert_server_healthy(server, stubs)


def test_fuzz_update_memory(server, stubs):
    @fuzz_settings(250)
    @given(memory_id=MEMORY_ID, fields=UPDATE_FIELDS, forbidden=FORBIDDEN_UPDATE)
    def run(memory_id, fields, forbidden):
        request = pb.UpdateMemoryRequest(id=_resolve(stubs, memory_id), **fields, **forbidden)
        before = row_snapshot(server, request.id)
        response, code, details = call(stubs.memory.UpdateMemory, request)
        assert_allowed(code, details, request)
        if memory_id is EXISTING and code is None:
            assert not forbidden, f"UpdateMemory accepted forbidden fields {sorted(forbidden)}"
            memory = response.memory
            assert memory.id == request.id
            if "content" in fields:
                assert memory.content == request.content
            if "type" in fields:
                assert memory.type == request.type
            if "metadata" in fields:
                assert plain(memory.metadata) == plain(request.metadata)
            if "key" in fields:
                assert memory.key == request.key
            stored, code, details = call(stubs.memory.GetMemory, pb.GetMemoryRequest(id=request.id))
            assert code is None and stored == memory, "GetMemory disagrees with UpdateMemory's answer"
        elif code is not None and before is not None:
            assert row_snapshot(server, request.id) == before, f"a refused update ({code.name}) changed the row"

    run()
    assert_server_healthy(server, stubs)


def test_fuzz_delete_memory(server, stubs):
    @fuzz_settings(150)
    @given(memory_id=MEMORY_ID)
    def run(memory_id):
        request = pb.DeleteMemoryRequest(id=_resolve(stubs, memory_id))
        before = row_count(server)
        response, code, details = call(stubs.memory.DeleteMemory, request)
        assert_allowed(code, details, request)
        if memory_id is EXISTING:
            assert code is None and response.success, f"deleting an existing memory failed: {code}"
        if response is not None:
            assert row_count(server) == before - 1
            _, code, _ = call(stubs.memory.GetMemory, pb.GetMemoryRequest(id=request.id))
            assert code is C.NOT_FOUND, "a deleted memory is still readable"
        else:
            assert row_count(server) == before

    run()
    assert_server_healthy(server, stubs)


def test_fuzz_check_health(server, stubs):
    # CheckHealthRequest has no fields: fuzz it with unknown fields (which a proto3 server
    # must ignore), interleaved with writes under a user owner.
    @fuzz_settings(80)
    @given(unknown=WIRE, content=SMALL_TEXT)
    def run(unknown, content):
        try:
            request = pb.CheckHealthRequest.FromString(unknown)
        except DecodeError:
            request = pb.CheckHealthRequest()
        call(stubs.memory.CreateMemory, pb.CreateMemoryRequest(api_key_id="fuzz-health", content=content))
        response, code, details = call(stubs.memory.CheckHealth, request)
        assert code is None, f"CheckHealth answered {code}: {details}"
        assert response.working, f"CheckHealth not working: {response.error}"
        assert response.latency_ms >= 0

    run()
    assert_server_healthy(server, stubs)


def test_invalid_creates_change_nothing(server, stubs):
    """A batch of creates that are each invalid in at least one way: every one is
    INVALID_ARGUMENT, the row count is the same afterwards, and the row owning the
    (apiKeyId, key) they target is untouched (no partial upsert)."""
    target_id = create_existing(stubs, "the original", api_key_id="owner", key="shared", metadata=_struct({"keep": 1}))
    target_before = row_snapshot(server, target_id)
    past = _ts(int(time.time()) - 3600, 0)
    breakers = st.sampled_from(
        [
            {"api_key_id": ""},
            {"api_key_id": "__memsvc_x"},
            {"api_key_id": "o" * 257},
            {"session_id": "s" * 257},
            {"content": ""},
            {"content": " \t\n"},
            {"content": "c" * (32 * 1024 + 1)},
            {"content": "🧠" * (8 * 1024 + 1)},
            {"type": "FACTUAL"},
            {"type": "fact"},
            {"key": "k" * 513},
            {"metadata": _struct({"blob": "m" * (16 * 1024)})},
            {"expires_at": past},
        ]
    )

    @fuzz_settings(60)
    @given(
        breaks=st.lists(breakers, min_size=1, max_size=3),
        content=st.text(st.characters(codec="utf-8"), min_size=1, max_size=40).filter(str.strip),
        metadata=st.dictionaries(SMALL_TEXT, st.one_of(st.integers(-1000, 1000), SMALL_TEXT), max_size=3),
    )
    def run(breaks, content, metadata):
        fields: dict[str, Any] = {
            "api_key_id": "owner",
            "key": "shared",
            "content": content,
            "metadata": _struct(metadata),
        }
        for b in breaks:
            fields.update(b)
        request = pb.CreateMemoryRequest(**fields)
        _, code, details = call(stubs.memory.CreateMemory, request)
        assert code is C.INVALID_ARGUMENT, f"{code}: {details[:200]} for {_describe(request)}"

    before = row_count(server)
    run()
    assert row_count(server) == before
    assert row_snapshot(server, target_id) == target_before
    assert_server_healthy(server, stubs)


# ---- (b) raw bytes to every method ------------------------------------------------------------


#: Streams that follow until the caller leaves: each raw request also asks to end once caught
#: up, or it would end at the deadline. The expected codes are judged on the bytes sent.
UNTIL_CAUGHT_UP = {"/memsvc.v1.MemoryService/WatchMemories": pb.WatchMemoriesRequest}


def _sent(path: str, data: bytes) -> bytes:
    """`data`, with stop_when_caught_up set for a following stream: the field is appended
    (the last value of a field wins), and where the bytes before it swallow it (a varint or
    a length they leave open runs on into it, so the request still decodes without it), the
    decoded request is sent again with the field set, its unknown fields kept."""
    request_cls = UNTIL_CAUGHT_UP.get(path)
    if request_cls is None:
        return data
    sent = data + b"\x18\x01"
    try:
        request = request_cls.FromString(sent)
    except DecodeError:
        return sent  # refused before any stream starts
    if not request.stop_when_caught_up:
        request.stop_when_caught_up = True
        sent = request.SerializeToString()
    return sent


def _raw_call(channel: grpc.Channel, path: str, streaming: bool, data: bytes) -> tuple[C | None, str]:
    identity = dict(request_serializer=lambda b: b, response_deserializer=lambda b: b)
    data = _sent(path, data)
    try:
        if streaming:
            list(channel.unary_stream(path, **identity)(data, timeout=CALL_TIMEOUT_S))
        else:
            channel.unary_unary(path, **identity)(data, timeout=CALL_TIMEOUT_S)
        return None, ""
    except grpc.RpcError as err:
        return err.code(), err.details() or ""


def _expected_codes(is_unimplemented: Callable[[str], bool], path: str, request_cls: type, data: bytes) -> frozenset:
    try:
        request_cls.FromString(_sent(path, data))
    except DecodeError:
        return UNDECODABLE
    if is_unimplemented(path):
        return frozenset({C.UNIMPLEMENTED})
    name = path.rsplit("/", 1)[1]
    allowed = ALLOWED if path.startswith("/memsvc.v1.MemoryService/") and name in IMPLEMENTED else LATER_ALLOWED
    return allowed | {None}


@pytest.fixture
def raw_channel(server):
    """The channel, and whether an RPC is not built yet, asked the way a client would (an
    empty request answers UNIMPLEMENTED); implemented CRUD RPCs must not say so."""
    channel = server.channel()
    streaming_of = {path: streaming for path, _, streaming in METHODS}
    known: dict[str, bool] = {}

    def is_unimplemented(path: str) -> bool:
        if path not in known:
            known[path] = _raw_call(channel, path, streaming_of[path], b"")[0] is C.UNIMPLEMENTED
            if path.startswith("/memsvc.v1.MemoryService/") and path.rsplit("/", 1)[1] in IMPLEMENTED:
                assert not known[path], f"{path} is implemented but answers UNIMPLEMENTED"
        return known[path]

    return channel, is_unimplemented


FIXED_RAW = [
    b"",
    b"\x00",
    b"\xff",
    b"\x08",
    b"\x0a",
    b"\x0a\x05ab",
    b"\x0a\x02\xff\xfe",
    b"\x0b\x0c",
    b"\x0f",
    b"\xff" * 11,
    b"\x80" * 10 + b"\x01",
    b"\x0a\x7f" + b"x" * 10,
    b"\x12\x00",
    b"\x3a\x04\x08\x01\x10\x01",
    b"\x0a\x00\x0a\x00",
    bytes(range(256)),
]


@pytest.mark.parametrize("path,request_cls,streaming", METHODS, ids=[m[0].rsplit(".", 1)[1] for m in METHODS])
def test_fixed_bytes_every_method(raw_channel, path, request_cls, streaming):
    channel, unimplemented = raw_channel
    for data in FIXED_RAW:
        code, details = _raw_call(channel, path, streaming, data)
        expected = _expected_codes(unimplemented, path, request_cls, data)
        assert code in expected, f"{path} {data[:40]!r}: got {code} {details[:200]!r}, expected {expected}"


def test_fuzz_raw_bytes_every_method(server, raw_channel):
    channel, unimplemented = raw_channel
    seen: Counter = Counter()  # how many inputs of each kind: decodable or not

    watch = next(m for m in METHODS if m[0] in UNTIL_CAUGHT_UP)

    @fuzz_settings(800)
    @given(method=st.sampled_from(METHODS), data=RAW_BYTES)
    @example(method=watch, data=b"\xc8")  # an open varint that swallowed the appended stop field
    def run(method, data):
        path, request_cls, streaming = method
        code, details = _raw_call(channel, path, streaming, data)
        expected = _expected_codes(unimplemented, path, request_cls, data)
        seen["undecodable" if expected is UNDECODABLE else "decodable"] += 1
        assert code is not C.DEADLINE_EXCEEDED, f"{path} hung on {data!r}"
        assert code in expected, f"{path} {data!r}: got {code} {details[:300]!r}, expected {sorted(map(str, expected))}"

    run()
    # Both kinds of input were exercised, not only undecodable noise.
    assert seen["undecodable"] > 0 and seen["decodable"] > 0, seen
    assert_server_healthy(server, server.stubs())


# ---- regression tests: specific inputs the fuzzers found --------------------------------------


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_non_finite_metadata_is_invalid_argument(server, stubs, bad):
    """A Struct number may be NaN/±Infinity on the gRPC wire (JSON cannot carry it); the
    metadata is then unrepresentable as JSON and must be refused as INVALID_ARGUMENT."""
    metadata = _struct({"n": 1})
    metadata.fields["n"].number_value = bad
    _, code, details = call(
        stubs.memory.CreateMemory, pb.CreateMemoryRequest(api_key_id="k", content="c", metadata=metadata)
    )
    assert code is C.INVALID_ARGUMENT, f"CreateMemory: {code} {details}"
    memory_id = create_existing(stubs)
    _, code, details = call(stubs.memory.UpdateMemory, pb.UpdateMemoryRequest(id=memory_id, metadata=metadata))
    assert code is C.INVALID_ARGUMENT, f"UpdateMemory: {code} {details}"
    assert_server_healthy(server, stubs)


@pytest.mark.parametrize("seconds,nanos", [(MAX_TS + 1, 0), (MIN_TS - 1, 0), (10**15, 0), (0, -1), (0, 10**9)])
def test_out_of_range_timestamp_is_invalid_argument(server, stubs, seconds, nanos):
    """A Timestamp outside the proto range (possible from any non-JSON client) is bad
    input, not a server bug."""
    ts = _ts(seconds, nanos)
    requests = [
        (stubs.memory.CreateMemory, pb.CreateMemoryRequest(api_key_id="k", content="c", expires_at=ts)),
        (stubs.memory.ClearMemories, pb.ClearMemoriesRequest(api_key_id="k", older_than=ts)),
        (stubs.memory.UpdateMemory, pb.UpdateMemoryRequest(id=create_existing(stubs), expires_at=ts)),
    ]
    codes = {type(r).__name__: call(fn, r)[1] for fn, r in requests}
    assert all(code is C.INVALID_ARGUMENT for code in codes.values()), codes


@pytest.mark.parametrize("limit,offset,page", [(1, INT32_MAX, None), (2, INT32_MAX, None), (1, None, INT32_MAX)])
def test_list_paging_extremes(server, stubs, limit, offset, page):
    """offset = 2^31-1 with limit 1 makes the page number 2^31, which does not fit the int32
    `page` field of the response: a success with a clamped page or INVALID_ARGUMENT, never
    INTERNAL."""
    request = _message(pb.ListMemoriesRequest, limit=limit, offset=offset, page=page)
    response, code, details = call(stubs.memory.ListMemories, request)
    assert_allowed(code, details, request)
    if response is not None:
        assert response.data == [] and 1 <= response.page <= INT32_MAX


@pytest.mark.parametrize(
    "make_id",
    [lambda: "x" * 1000, lambda: "x" * 20_000, lambda: "é" * 3000, lambda: "🧠" * 2000],
    ids=["ascii-1000", "ascii-20000", "latin-3000", "astral-2000"],
)
def test_long_unknown_id_is_not_found(server, stubs, make_id):
    """An unknown id answers NOT_FOUND (or INVALID_ARGUMENT for an over-long id) whatever its
    length. Echoing the whole id in the error message (grpc-message and the details trailer)
    pushes the trailers past the client's default 8/16 KiB metadata limits, and the client
    then sees RESOURCE_EXHAUSTED instead of the service's answer."""
    memory_id = make_id()
    for fn, request in [
        (stubs.memory.GetMemory, pb.GetMemoryRequest(id=memory_id)),
        (stubs.memory.DeleteMemory, pb.DeleteMemoryRequest(id=memory_id)),
        (stubs.memory.UpdateMemory, pb.UpdateMemoryRequest(id=memory_id, content="x")),
    ]:
        _, code, details = call(fn, request)
        assert code in (C.NOT_FOUND, C.INVALID_ARGUMENT), f"{type(request).__name__}: {code} {details[:200]}"


def test_duplicate_key_conflict_reaches_client(server, stubs):
    """Renaming a memory onto a key its owner already uses is ABORTED DUPLICATE_KEY, also for
    the longest allowed key (512 characters, here 4-byte ones). The message and ErrorInfo
    both echo the key; the client must still receive ABORTED, every time."""
    key = "🧠" * 512
    create_existing(stubs, "holder", api_key_id="owner", key=key)
    other = create_existing(stubs, "mover", api_key_id="owner", key="other")
    codes = Counter(call(stubs.memory.UpdateMemory, pb.UpdateMemoryRequest(id=other, key=key))[1] for _ in range(20))
    assert codes == Counter({C.ABORTED: 20}), codes


# ---- concurrency properties ---------------------------------------------------------------------


def test_concurrent_check_health_all_working(server, stubs):
    """CheckHealth is a health probe: several load balancers or sidecars probing at once
    must all see working=true on a healthy server."""
    results: list[tuple[bool, str]] = []
    lock = threading.Lock()

    def probe():
        for _ in range(25):
            response = stubs.memory.CheckHealth(pb.CheckHealthRequest(), timeout=CALL_TIMEOUT_S)
            with lock:
                results.append((response.working, response.error))

    threads = [threading.Thread(target=probe) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 200
    failures = Counter(error for working, error in results if not working)
    assert not failures, f"{sum(failures.values())}/200 concurrent probes reported not working: {dict(failures)}"
    assert_server_healthy(server, stubs)


def test_read_your_writes_under_concurrent_reads(server, stubs):
    """Once UpdateMemory / DeleteMemory has returned, GetMemory shows the change, even while
    other clients are reading the same memory (the read cache must not keep the old row)."""
    stale: list[str] = []
    for round_no in range(40):
        memory_id = create_existing(stubs, "v0")
        stop = threading.Event()

        def reader():
            while not stop.is_set():
                call(stubs.memory.GetMemory, pb.GetMemoryRequest(id=memory_id))

        readers = [threading.Thread(target=reader) for _ in range(3)]
        for t in readers:
            t.start()
        try:
            time.sleep(0.003)
            stubs.memory.UpdateMemory(pb.UpdateMemoryRequest(id=memory_id, content="v1"), timeout=CALL_TIMEOUT_S)
            time.sleep(0.003)
            got = stubs.memory.GetMemory(pb.GetMemoryRequest(id=memory_id), timeout=CALL_TIMEOUT_S).content
            if got != "v1":
                stale.append(f"round {round_no}: GetMemory returned {got!r} after UpdateMemory to 'v1'")
            stubs.memory.DeleteMemory(pb.DeleteMemoryRequest(id=memory_id), timeout=CALL_TIMEOUT_S)
            time.sleep(0.003)
            _, code, _ = call(stubs.memory.GetMemory, pb.GetMemoryRequest(id=memory_id))
            if code is not C.NOT_FOUND:
                stale.append(f"round {round_no}: GetMemory answered {code} after DeleteMemory")
        finally:
            stop.set()
            for t in readers:
                t.join(10)
        if len(stale) >= 3:
            break
    assert not stale, "stale reads: " + "; ".join(stale)
