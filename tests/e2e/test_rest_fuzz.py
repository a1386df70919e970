"""Property-based fuzzing of the REST surface through the real Envoy and a real server.

Requests are drawn from the documented routes (read from the descriptors, as Envoy reads
them) and then bent: another method, odd path segments and percent-encodings, random query
parameters, headers (tokens, content types, gRPC's own names, a spoofed guard marker, large
values) and bodies (the request message's own shape with right and wrong types, free JSON,
deep nesting, huge strings, odd unicode, garbage bytes). Whatever is sent:

- the answer is never a 5xx: no 500 from a bug and no 503 either, since nothing this server
  depends on is down;
- a refusal (any 4xx) changes nothing: memories, settings, appended messages and the files
  under the data dir are the same before and after it;
- a refusal carries the JSON error body `{"code", "message"}`, whoever made it (memsvc or
  Envoy).

Two more properties of the check on JSON bodies, on every route whose body is the request
message: a field the message does not have is refused with 400 that names it, whatever else
the body holds and whichever JSON content type it comes with; a body of known fields only is
never refused for an unknown one.

And who may call: a body declared anything but JSON is 415, a Host this server does not
answer to (or one with userinfo) and an Origin other than the request's own are 403, on
every route and whatever the request holds, and none of them changes anything.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import apsw
import pytest
from conftest import ServerHandle, make_config, start_gateway, start_server
from google.api import annotations_pb2
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_rest_routes import Route, _rule_route

from memsvc.gateway.envoy_config import SERVICES
from memsvc.gateway.request_guard import MAX_WALK_DEPTH, service_methods

pytestmark = pytest.mark.e2e

TOKEN = "rest-fuzz-token"


def _routes() -> list[Route]:
    """Every REST binding of every service Envoy transcodes (additional bindings included)."""
    routes = []
    for method in service_methods(SERVICES):
        rule = method.GetOptions().Extensions[annotations_pb2.http]
        if rule.WhichOneof("pattern"):
            routes += [_rule_route(r, method.full_name) for r in [rule, *rule.additional_bindings]]
    return routes


ROUTES = _routes()
BODY_ROUTES = [r for r in ROUTES if r.has_body]
# Free-form JSON: any key is legitimate inside these.
FREE_FORM = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
SETTLE_TIMEOUT_S = 30.0


def fuzz_settings(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    )


def _input_type(route: Route) -> Descriptor:
    return descriptor_pool.Default().FindMethodByName(route.rpc).input_type


# ---- the stack and the store ---------------------------------------------------------------


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    # No background flush of appended messages during the run (so no review starts behind
    # the fuzzer's back); everything else as served.
    config = make_config(
        tmp_path_factory.mktemp("rest-fuzz"),
        api_tokens=(TOKEN,),
        recent_flush_s=3600.0,
        recent_flush_messages=1_000_000,
    )
    handle = start_server(config)
    gateway = start_gateway(handle)
    yield handle, gateway.settings.listen_port
    gateway.stop()
    handle.stop()


def settle(server: ServerHandle) -> None:
    """Wait for writes acknowledged before now (background extraction) to land."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    while server.app.background.pending():
        assert time.monotonic() < deadline, "background writes did not finish"
        time.sleep(0.01)


def snapshot(server: ServerHandle) -> dict[str, Any]:
    """What a refused request must not change. Access counters (written later by design)
    and rows expiring within the day (removed by the expiry sweep) are left out."""
    settle(server)
    horizon = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    db = apsw.Connection(str(server.config.db_path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        state: dict[str, Any] = {
            "memories": db.execute(
                "SELECT id, api_key_id, session_id, type, key, content, metadata, created_at, updated_at,"
                " expires_at FROM memories WHERE expires_at IS NULL OR expires_at > ? ORDER BY id",
                (horizon,),
            ).fetchall(),
            "settings": db.execute("SELECT key, value FROM settings ORDER BY key").fetchall(),
            "pending": db.execute("SELECT id, character, role, text FROM recent_pending ORDER BY id").fetchall(),
            "credentials": db.execute(
                "SELECT id, permissions, tenants, characters, revoked_at FROM credentials ORDER BY id"
            ).fetchall(),
        }
    finally:
        db.close()
    data = server.config.data_dir
    state["files"] = {
        str(p.relative_to(data)): p.read_bytes()
        for root in (server.config.runtime_memory_dir, server.config.config_dir)
        if root.exists()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
    return state


def send(port: int, method: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes) -> tuple[int, bytes]:
    """One HTTP/1.1 request written byte for byte (no client library rewrites it)."""
    status, _, payload = exchange(port, method, target, headers, body)
    return status, payload


def exchange(
    port: int, method: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes
) -> tuple[int, http.client.HTTPMessage, bytes]:
    """`send`, with the response's headers."""
    head = [
        method.encode() + b" " + target + b" HTTP/1.1",
        b"content-length: " + str(len(body)).encode(),
        b"connection: close",
    ]
    if not any(k.lower() == b"host" for k, _ in headers):
        head.append(b"host: 127.0.0.1")
    head += [k + b": " + v for k, v in headers]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body)
        response = http.client.HTTPResponse(sock, method=method)
        response.begin()
        return response.status, response.headers, response.read()


# ---- strategies ------------------------------------------------------------------------------

ODD_TEXT = st.sampled_from(
    [
        "",
        " ",
        "k",
        "fuzz",
        "Mia",
        "\x00",
        "a\x00b",
        "\x7f\x1b[31m",
        "\u202e\u200b\ufeff",
        "İ",
        "ß",
        "🧠",
        "\ufffd",
        "\uffff",
        "\U0010ffff",
        "..",
        ".",
        "/",
        "\\",
        "%",
        "%ff",
        "%00",
        "?",
        "#",
        "&",
        "=",
        "+",
        "' OR 1=1 --",
        "recent_Mia.json",
        "recent_.json",
        "é" * 70,
        "a" * 300,
    ]
)
TEXT = st.one_of(
    ODD_TEXT,
    st.text(max_size=20),
    st.builds(lambda c, n: c * n, st.sampled_from("a🧠é "), st.sampled_from([1024, 5000, 40_000])),
)
SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
    st.sampled_from(["NaN", "Infinity", "-0", "1e999", "true", "yes", "2099-01-01T00:00:00Z"]),
)
ANY_JSON = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=12,
)
TIMESTAMP = st.sampled_from(
    [
        "2099-01-01T00:00:00Z",
        "2000-01-01T00:00:00Z",
        "1970-01-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "0001-01-01T00:00:00Z",
        "2099-13-01T00:00:00Z",
        "tomorrow",
        "",
        "2099-01-01T00:00:00+09:00",
    ]
)


def _deep(depth: int, kind: str) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


DEEP = st.builds(_deep, st.sampled_from([20, 33, 34, 64, 99, 100, 150]), st.sampled_from(["list", "dict"]))


def _scalar_for(field: FieldDescriptor) -> st.SearchStrategy[Any]:
    t = field.type
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["NaN", "Infinity"]))
    if t in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES, FieldDescriptor.TYPE_ENUM):
        return TEXT
    return st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from([0, 1, 50, 201, -1, "12", 2**40]))


def _value_for(field: FieldDescriptor, depth: int, loose: bool = True) -> st.SearchStrategy[Any]:
    """A value of the field's own type (mostly, or only when not `loose`), else anything."""
    msg = field.message_type
    if msg is None:
        own = _scalar_for(field)
    elif msg.GetOptions().map_entry:
        own = st.dictionaries(TEXT, _value_for(msg.fields_by_name["value"], depth + 1, loose), max_size=3)
    elif msg.full_name == "google.protobuf.Timestamp":
        own = TIMESTAMP
    elif msg.full_name in FREE_FORM:
        own = (
            st.one_of(ANY_JSON, DEEP)
            if msg.full_name != "google.protobuf.Struct"
            else st.one_of(st.dictionaries(TEXT, ANY_JSON, max_size=4), DEEP.map(lambda v: {"d": v}))
        )
    elif depth > 3:
        own = st.just({})
    else:
        own = message_body(msg, depth + 1, loose)
    if field.is_repeated and not (msg and msg.GetOptions().map_entry):
        own = st.lists(own, max_size=3)
    return st.one_of(own, own, own, ANY_JSON) if loose else own


def message_body(msg: Descriptor, depth: int = 0, loose: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object shaped like `msg`: a random subset of its fields, each under its JSON
    name or its proto name, with values of the field's type or (when `loose`) not."""
    fields = list(msg.fields)
    if not fields:
        return st.just({})

    @st.composite
    def build(draw) -> dict[str, Any]:
        chosen = draw(st.lists(st.sampled_from(fields), unique_by=lambda f: f.number, max_size=len(fields)))
        return {draw(st.sampled_from([f.json_name, f.name])): draw(_value_for(f, depth, loose)) for f in chosen}

    return build()


def _path_value() -> st.SearchStrategy[bytes]:
    encoded = st.one_of(ODD_TEXT, st.text(max_size=20)).map(lambda t: quote(t, safe="").encode())
    raw = st.sampled_from(
        [
            b"%ff",
            b"%ff%fe",
            b"%c3%28",
            b"%",
            b"%zz",
            b"%00",
            b"%2e%2e",
            b"..",
            b".",
            b"a%2Fb",
            b"Mia",
            b"\xff",
            b"\xe3\x81\x82",
        ]
    )
    usual = st.one_of(encoded, raw, st.just(b"k"))
    huge = st.sampled_from([b"a" * 9000, b"x" * 8100])  # over the URL limit, alone or together
    return st.integers(0, 24).flatmap(lambda n: huge if n == 0 else usual)


@st.composite
def targets(draw, route: Route) -> bytes:
    path = route.template.encode()
    while b"{" in path:
        start, end = path.index(b"{"), path.index(b"}")
        path = path[:start] + draw(_path_value()) + path[end + 1 :]
    path = draw(st.sampled_from([path] * 6 + [path + b"/", path.replace(b"/api/", b"/api//"), path.upper()]))
    names = [f.json_name for f in _input_type(route).fields] + ["x", "apiKeyId", "bogus", "%ff", ""]
    params = draw(st.lists(st.tuples(st.sampled_from(names), _path_value()), max_size=4))
    if not params:
        return path
    return path + b"?" + b"&".join(quote(k, safe="%").encode() + b"=" + v for k, v in params)


HEADER_VALUE = st.one_of(
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=40).map(
        lambda t: t.encode("latin-1")
    ),
    st.sampled_from([b"###", b"AAAA", b"YWJj", b"=", b"", b"1S", b"99999999999H", b"gzip", b"trailers"]),
)
BIG_HEADER_VALUE = st.sampled_from([1000, 9000, 20_000, 31_000]).map(lambda n: b"v" * n)
HEADER = st.tuples(
    st.sampled_from(
        [
            b"x-fuzz",
            b"x-trace-bin",
            b"grpc-timeout",
            b"grpc-encoding",
            b"te",
            b"accept",
            b"x-request-id",
            b"x-memsvc-guard",
            b"cookie",
            b"x-envoy-original-path",
            b"accept-encoding",
            b"origin",
        ]
    ),
    HEADER_VALUE,
)
CONTENT_TYPE = st.sampled_from(
    [
        b"application/json",
        b"application/json",
        b"application/json; charset=utf-8",
        b"text/plain",
        b"application/x-www-form-urlencoded",
        b"application/grpc-web",
        b"application/grpc;x",
        b"Application/GRPC",
        b"application/grpc+json",
        b"application/grpc",
        b"",
    ]
)
LOOPBACK_NAMES = {b"127.0.0.1", b"localhost", b"[::1]"}
# Host values Envoy's HTTP/1 codec lets through (it refuses a path or an empty Host itself)
# that name anything but loopback, or loopback with userinfo or a bad port.
FOREIGN_HOST = st.one_of(
    st.sampled_from(
        [
            b"evil.example",
            b"evil.example:8080",
            b"127.0.0.1:1@evil.example",
            b"127.0.0.1@evil.example",
            b"user@127.0.0.1",
            b"127.0.0.1.nip.io",
            b"localhost.evil.example",
            b"0.0.0.0",
            b"[::2]:80",
            b"127.0.0.2",
            b"127.0.0.1:80x",
            b"127.0.0.1:123456",
            b"localhost.",
            b"[::1]x",
            b"LOCALHOST.EVIL",
        ]
    ),
    st.from_regex(rb"\A[a-z0-9][a-z0-9.-]{0,30}(:[0-9]{1,5})?\Z").filter(
        lambda h: h.split(b":")[0] not in LOOPBACK_NAMES
    ),
)
LOOPBACK_HOST = st.builds(
    lambda n, p: n + p,
    st.sampled_from(sorted(LOOPBACK_NAMES) + [b"LocalHost"]),
    st.sampled_from([b"", b":8080", b":1"]),
)
FOREIGN_ORIGIN = st.one_of(
    st.sampled_from(
        [
            b"null",
            b"http://evil.example",
            b"http://127.0.0.1:1",
            b"https://localhost:3000",
            b"http://127.0.0.1.evil.example",
            b"file://",
            b"http://127.0.0.1/",
        ]
    ),
    st.builds(lambda scheme, host: scheme + host, st.sampled_from([b"http://", b"https://", b""]), FOREIGN_HOST),
)
AUTH = st.one_of(
    st.just(b"Bearer " + TOKEN.encode()),
    st.just(b"Bearer " + TOKEN.encode()),
    st.just(b"Bearer " + TOKEN.encode()),
    st.just(b"Bearer wrong"),
    st.just(b"Basic Zm9v"),
    st.just(b"bearer " + TOKEN.encode()),
    HEADER_VALUE,
    st.none(),
)


def _encode(value: Any, ascii_only: bool) -> bytes:
    return json.dumps(value, ensure_ascii=ascii_only, allow_nan=False).encode("utf-8", "surrogatepass")


@st.composite
def bodies(draw, route: Route) -> bytes:
    shaped = message_body(_input_type(route))
    kind = draw(st.sampled_from(["shaped"] * 5 + ["unknown", "json", "deep", "garbage", "raw", "empty"]))
    if kind == "shaped":
        return _encode(draw(shaped), draw(st.booleans()))
    if kind == "unknown":
        body = draw(shaped)
        body[draw(st.sampled_from(["expiresAT", "bogus", "apikeyid", "\u00e9", "a" * 300]))] = draw(ANY_JSON)
        return _encode(body, draw(st.booleans()))
    if kind == "json":
        return _encode(draw(ANY_JSON), False)
    if kind == "deep":
        return _encode(draw(DEEP), True)
    if kind == "garbage":
        return draw(st.binary(max_size=64))
    if kind == "raw":
        return draw(
            st.sampled_from(
                [
                    b'{"apiKeyId": "k", "content": "\\ud800"}',
                    b'{"apiKeyId": "k", "content": "\xff\xfe"}',
                    b'{"a": 1, "a": 2}',
                    b'{"apiKeyId":"k","content":"x"} trailing',
                    b'{"apiKeyId":"k"',
                    b'\xef\xbb\xbf{"apiKeyId":"k","content":"x"}',
                    b'{"exp\\u0069resAT": 1}',
                    b"[" * 5000,
                    b'{"metadata": ' + b'{"a":' * 200 + b"1" + b"}" * 200 + b"}",
                    b"null",
                    b"[]",
                    b'"x"',
                    b"1e999",
                ]
            )
        )
    return b""


@st.composite
def requests(draw) -> tuple[str, bytes, list[tuple[bytes, bytes]], bytes]:
    route = draw(st.sampled_from(ROUTES))
    method = draw(st.sampled_from([route.method] * 12 + ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]))
    headers = [(b"content-type", draw(CONTENT_TYPE))]
    auth = draw(AUTH)
    if auth is not None:
        headers.append((b"authorization", auth))
    headers += draw(st.lists(HEADER, max_size=3))
    where = draw(st.integers(0, 15))
    if where == 0:
        headers.append((b"host", draw(st.one_of(FOREIGN_HOST, LOOPBACK_HOST))))
    elif where == 1:
        headers.append((b"origin", draw(st.one_of(FOREIGN_ORIGIN, st.just(b"http://127.0.0.1")))))
    if draw(st.integers(0, 9)) == 0:
        headers.append((b"x-large", draw(BIG_HEADER_VALUE)))
    body = draw(bodies(route)) if method != "GET" or draw(st.booleans()) else b""
    return method, draw(targets(route)), headers, body


# ---- the properties --------------------------------------------------------------------------


def _describe(method: str, target: bytes, headers: list[tuple[bytes, bytes]], body: bytes) -> str:
    shown = [(k, v[:80] + b"..." if len(v) > 80 else v) for k, v in headers]
    return f"{method} {target[:200]!r} headers={shown} body={body[:300]!r}"


def test_fuzz_rest_surface_never_5xx_and_refusals_change_nothing(stack):
    server, port = stack
    seen: dict[int, int] = {}

    @fuzz_settings(200)
    @given(request=requests())
    def run(request):
        method, target, headers, body = request
        before = snapshot(server)
        status, payload = send(port, method, target, headers, body)
        seen[status] = seen.get(status, 0) + 1
        what = _describe(method, target, headers, body)
        assert status < 500, f"{status} for {what}: {payload[:500]!r}"
        if 400 <= status < 500:
            assert snapshot(server) == before, f"refused with {status} but the store changed: {what}"
            if method != "HEAD":
                error = json.loads(payload)
                assert isinstance(error.get("code"), int) and "message" in error, (status, what, payload[:300])

    run()
    # The fuzz reached both sides: some requests were served, some refused.
    assert any(200 <= s < 300 for s in seen) and any(400 <= s < 500 for s in seen), seen


UNKNOWN_KEY = st.one_of(
    st.text(
        st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789"), min_size=1, max_size=30
    ),
    st.sampled_from(["expiresAT", "ApiKeyId", "api-key-id", "\u00e9t\u00e9", "🧠", "a b"]),
)
# The content types a body is accepted with.
JSON_TYPES = st.sampled_from(
    [
        b"application/json",
        b"application/json; charset=utf-8",
        b"Application/JSON",
        b"application/json;charset=UTF-8",
        b" application/json",
    ]
)
# Content types the transcoder would read as JSON (anything but gRPC's and gRPC-Web's), but
# that are not JSON's: what a web page may send across origins without asking, and more.
NOT_JSON_TYPES = st.one_of(
    st.sampled_from(
        [
            b"text/plain",
            b"text/plain;charset=UTF-8",
            b"application/x-www-form-urlencoded",
            b"multipart/form-data; boundary=----x",
            b"application/grpc;x",
            b"Application/GRPC",
            b"text/json",
            b"application/json5",
            b"application/jsonl",
            b"json",
            b"application/x-json",
            b"*/*",
        ]
    ),
    st.from_regex(rb"\A[a-z]{1,12}/[a-z0-9.+-]{1,20}\Z").filter(
        lambda t: t.lower() != b"application/json" and not t.lower().startswith(b"application/grpc")
    ),
)
# Routes whose whole JSON body is parsed into the request message (`body: "*"`).
STAR_ROUTES = [
    r
    for r in BODY_ROUTES
    if _input_type(r).full_name
    not in {"memsvc.v1.UpdateMemorySettingsRequest", "memsvc.v1.UpdateQdrantSettingsRequest"}
]


def test_fuzz_unknown_body_field_is_a_400_naming_it_on_every_route(stack):
    server, port = stack

    @fuzz_settings(60)
    @given(route=st.sampled_from(STAR_ROUTES), data=st.data(), key=UNKNOWN_KEY)
    def run(route, data, key):
        msg = _input_type(route)
        if key in {n for f in msg.fields for n in (f.name, f.json_name)}:
            return
        # The unknown key first: a wrong-typed value drawn for a known field may hold unknown
        # keys of its own, and the first one met is the one reported.
        body = {key: data.draw(ANY_JSON), **data.draw(message_body(msg))}
        target = re.sub(r"\{[^}]*\}", "Mia", route.template).encode()
        before = snapshot(server)
        status, payload = send(
            port,
            route.method,
            target,
            [(b"content-type", data.draw(JSON_TYPES)), (b"authorization", b"Bearer " + TOKEN.encode())],
            _encode(body, data.draw(st.booleans())),
        )
        error = json.loads(payload)
        assert status == 400 and error["code"] == 3, (route, body, error)
        violations = [v for d in error.get("details", []) for v in d.get("fieldViolations", [])]
        assert violations == [{"field": key, "description": "unknown field"}], (route, body, error)
        assert key in error["message"]
        assert snapshot(server) == before

    run()


def test_fuzz_a_body_of_known_fields_is_never_refused_for_an_unknown_one(stack):
    """The other side of the guard: every field the message has, under its JSON name or its
    proto name, with free-form values (`metadata`, an inject `request`) holding any keys,
    passes it."""
    server, port = stack

    @fuzz_settings(60)
    @given(route=st.sampled_from(STAR_ROUTES), data=st.data())
    def run(route, data):
        body = data.draw(message_body(_input_type(route), loose=False))
        target = re.sub(r"\{[^}]*\}", "Mia", route.template).encode()
        status, payload = send(
            port,
            route.method,
            target,
            [(b"content-type", b"application/json"), (b"authorization", b"Bearer " + TOKEN.encode())],
            _encode(body, data.draw(st.booleans())),
        )
        assert status < 500, (route, body, payload[:300])
        if status == 400:
            error = json.loads(payload)
            unknown = [
                v
                for d in error.get("details", [])
                for v in d.get("fieldViolations", [])
                if v.get("description") == "unknown field"
            ]
            assert not unknown, (route, body, error)

    run()


def test_fuzz_a_body_not_declared_json_is_a_415_on_every_route(stack):
    """Whatever the body holds, on every route that takes one: nothing changes."""
    server, port = stack

    @fuzz_settings(60)
    @given(route=st.sampled_from(BODY_ROUTES), data=st.data())
    def run(route, data):
        body = data.draw(st.one_of(bodies(route), st.just(b"")))
        headers = [(b"authorization", b"Bearer " + TOKEN.encode())]
        ctype = data.draw(st.one_of(NOT_JSON_TYPES, st.none()))
        if ctype is not None:
            headers.append((b"content-type", ctype))
        elif not body:
            return  # neither a body nor a content type: nothing to declare
        target = re.sub(r"\{[^}]*\}", "Mia", route.template).encode()
        before = snapshot(server)
        status, payload = send(port, route.method, target, headers, body)
        error = json.loads(payload)
        assert status == 415 and error["code"] == 3, (route, ctype, body[:200], error)
        assert "application/json" in error["message"]
        assert snapshot(server) == before

    run()


def test_fuzz_a_foreign_host_or_origin_is_a_403_on_every_route(stack):
    """Before anything else is looked at: any route, method, body and token."""
    server, port = stack

    @fuzz_settings(80)
    @given(request=requests(), data=st.data())
    def run(request, data):
        method, target, headers, body = request
        # What Envoy's HTTP codec refuses before any filter runs (a raw byte above 0x7f in
        # the URL, 32 KiB of headers, the URL included) is left out: it never gets that far.
        assume(all(b < 0x80 for b in target) and len(target) < 24_000)
        headers = [(k, v) for k, v in headers if k not in (b"host", b"origin", b"x-large")]
        if data.draw(st.booleans()):
            headers.append((b"host", data.draw(FOREIGN_HOST)))
        else:
            host, origin = data.draw(LOOPBACK_HOST), data.draw(FOREIGN_ORIGIN)
            assume(origin.lower() not in (b"http://" + host.lower(), b"https://" + host.lower()))
            headers += [(b"host", host), (b"origin", origin)]
        before = snapshot(server)
        status, answer, payload = exchange(port, method, target, headers, body)
        what = _describe(method, target, headers, body)
        ctype = dict(headers).get(b"content-type", b"")
        if status == 200:
            # A gRPC request (application/grpc[+codec]) gets Envoy's refusal as gRPC: HTTP 200
            # with the status in a header.
            assert ctype == b"application/grpc" or ctype.startswith(b"application/grpc+"), what
            assert answer.get("grpc-status") == "7", f"{answer} for {what}"
        else:
            assert status == 403, f"{status} for {what}: {payload[:300]!r}"
            assert json.loads(payload)["code"] == 7, what
        assert snapshot(server) == before

    run()


def _depth(value: Any) -> int:
    """How deep a JSON value nests its objects and arrays (a scalar: 0)."""
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


# What the transcoder's lenient JSON parser also reads, one change to a strict body each.
LENIENCIES = {
    "form feed first": lambda t: b"\x0c" + t,
    "vertical tab first": lambda t: b"\x0b" + t,
    "form feed after a comma": lambda t: t.replace(b", ", b",\x0c", 1),
    "vertical tab before a colon": lambda t: t.replace(b'": ', b'"\x0b: ', 1),
    "single-quoted keys": lambda t: re.sub(rb'"([A-Za-z_]\w*)": ', rb"'\1': ", t),
    "bare keys": lambda t: re.sub(rb'"([A-Za-z_]\w*)": ', rb"\1: ", t),
    "trailing comma": lambda t: t[:-1] + b", }",
    "trailing content": lambda t: t + b" x",
}


def test_fuzz_a_body_that_is_not_strict_json_is_a_400_and_never_passes_an_unknown_field(stack):
    """Each leniency, on any route, with or without an unknown field: 400, nothing changes;
    the strict text of the same body is refused only for its unknown field, if any."""
    server, port = stack

    @fuzz_settings(80)
    @given(
        route=st.sampled_from(STAR_ROUTES),
        data=st.data(),
        key=UNKNOWN_KEY,
        leniency=st.sampled_from(sorted(LENIENCIES)),
    )
    def run(route, data, key, leniency):
        msg = _input_type(route)
        body = data.draw(message_body(msg, loose=False))
        unknown = data.draw(st.booleans()) and key not in {n for f in msg.fields for n in (f.name, f.json_name)}
        if unknown:
            body = {key: 1, **body}
        strict = _encode(body, True)
        bent = LENIENCIES[leniency](strict)
        if bent == strict:
            return
        target = re.sub(r"\{[^}]*\}", "Mia", route.template).encode()
        before = snapshot(server)
        status, payload = send(
            port,
            route.method,
            target,
            [(b"content-type", b"application/json"), (b"authorization", b"Bearer " + TOKEN.encode())],
            bent,
        )
        error = json.loads(payload)
        assert status == 400 and error["code"] == 3, (route, leniency, bent[:300], error)
        # A body nested deeper than the guard walks is the transcoder's to refuse, which it does
        # with the first error its lenient parse meets on the way down (a bad timestamp before
        # the depth, say): refused all the same.
        assert (
            "not strict JSON" in error["message"]
            or (unknown and "unknown field" in error["message"])
            or "Message too deep" in error["message"]
            or _depth(body) > MAX_WALK_DEPTH
        ), error
        assert snapshot(server) == before

    run()


# The two values of a doubled field: of any type (the guard refuses before types matter), but
# not nested past the depth the guard walks (the transcoder refuses such bodies itself).
SHALLOW = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), TEXT, st.lists(st.integers(), max_size=3))


def _duplicated(body: dict[str, Any], spelling: str, value: Any, ascii_only: bool) -> bytes:
    """The strict JSON of `body` with one more key, first: `spelling` (a field `body` holds
    already, in this or its other spelling)."""
    rest = _encode(body, ascii_only)
    first = _encode({spelling: value}, ascii_only)[:-1]
    return first + (b", " + rest[1:] if rest != b"{}" else b"}")


def test_fuzz_a_field_twice_in_the_body_or_the_query_is_a_400(stack):
    """Any field of any route's message, twice in one JSON object in either spelling, or a
    field that is not repeated twice in the query: 400 naming it, nothing changes."""
    server, port = stack

    @fuzz_settings(80)
    @given(route=st.sampled_from(ROUTES), data=st.data())
    def run(route, data):
        msg = _input_type(route)
        bound = set(re.findall(r"\{([^}=]+)", route.template))
        fields = [f for f in msg.fields if f.name not in bound]
        if not fields:
            return
        field = data.draw(st.sampled_from(fields))
        spellings = (
            data.draw(st.sampled_from([field.json_name, field.name])),
            data.draw(st.sampled_from([field.json_name, field.name])),
        )
        target = re.sub(r"\{[^}]*\}", "Mia", route.template)
        in_query = not route.has_body or data.draw(st.booleans())
        body = b""
        if in_query:
            if field.message_type is not None or field.is_repeated:
                return  # a message field has no query form; a repeated one may come often
            target += f"?{spellings[0]}=1&{spellings[1]}=2"
        else:
            if route not in STAR_ROUTES:
                return  # the body is the message's only on these
            # The second spelling right after the first: the walk meets it before any value
            # nested deeper than it checks (the transcoder refuses those itself).
            rest = {spellings[1]: data.draw(SHALLOW)}
            rest.update(
                (k, v)
                for k, v in data.draw(message_body(msg, loose=False)).items()
                if k not in (field.name, field.json_name)
            )
            body = _duplicated(rest, spellings[0], data.draw(SHALLOW), data.draw(st.booleans()))
        before = snapshot(server)
        status, payload = send(
            port,
            route.method,
            target.encode(),
            [(b"content-type", b"application/json"), (b"authorization", b"Bearer " + TOKEN.encode())],
            body,
        )
        error = json.loads(payload)
        assert status == 400 and error["code"] == 3, (route, target, body[:300], error)
        violations = [v for d in error.get("details", []) for v in d.get("fieldViolations", [])]
        assert violations == [{"field": spellings[1], "description": "given more than once"}], (target, body, error)
        assert snapshot(server) == before

    run()
