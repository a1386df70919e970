"""The OpenAPI document of the REST surface (memsvc.gateway.openapi, committed as
deploy/openapi.json): it is what the generator makes of the descriptor set, valid OpenAPI 3.1,
one operation per google.api.http binding, and its schemas accept the JSON that protobuf's own
printer makes with the transcoder's print options (every field without presence printed,
json_names) and refuse JSON that lacks a field Envoy always prints.

A proto of the tests' own, compiled with the pinned protoc, covers what memsvc's protos do not
use (enums, real oneofs, 64-bit and bytes fields, maps with integer keys, wrappers, a
`response_body`, nested query parameters) and the descriptions taken from proto comments."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from google.api import annotations_pb2
from google.protobuf import descriptor_pb2, json_format, message_factory
from grpc_tools import protoc
from jsonschema import Draft202012Validator, ValidationError
from openapi_spec_validator import OpenAPIV31SpecValidator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from memsvc.gateway import envoy_config, openapi
from memsvc.gateway.envoy_config import SERVICES, EnvoySettings

ROOT = Path(__file__).resolve().parents[2]
DESCRIPTOR = ROOT / "gen" / "memsvc" / "v1" / "memsvc.pb"
COMMITTED = ROOT / "deploy" / "openapi.json"
DOC = json.loads(COMMITTED.read_text())


def schema_of(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return doc["components"]["schemas"][name]


def validator(doc: dict[str, Any], name: str) -> Draft202012Validator:
    """A JSON Schema 2020-12 validator of components/schemas/<name>, its $refs resolved in `doc`."""
    registry: Registry = Registry().with_resource("urn:doc", Resource.from_contents(doc, DRAFT202012))
    ref = {"$ref": f"urn:doc#/components/schemas/{name}"}
    return Draft202012Validator(ref, registry=registry)


def printed(message: Any) -> Any:
    """`message` as the transcoder prints it: json_names, fields without presence always."""
    return json_format.MessageToDict(message, always_print_fields_with_no_presence=True)


# ---- the committed document ------------------------------------------------------------------


def test_the_committed_document_is_what_the_generator_makes() -> None:
    fresh = openapi.render(openapi.document(DESCRIPTOR.read_bytes(), SERVICES))
    assert COMMITTED.read_text() == fresh, "deploy/openapi.json is stale: run .venv/bin/python scripts/generate.py"


def test_the_document_is_valid_openapi_3_1() -> None:
    OpenAPIV31SpecValidator(DOC).validate()
    assert DOC["openapi"] == "3.1.0"


def test_an_invalid_document_is_refused_by_the_validator() -> None:
    """The validator does refuse: a path parameter that is not required is not OpenAPI."""
    broken = json.loads(COMMITTED.read_text())
    broken["paths"]["/api/memory/{id}"]["get"]["parameters"][0]["required"] = False
    with pytest.raises(Exception, match="required"):
        OpenAPIV31SpecValidator(broken).validate()


def _rest_bindings() -> set[tuple[str, str]]:
    """(method, path template) of every google.api.http binding, read from the descriptor set
    with descriptor_pb2 directly (not through the generator)."""
    files = descriptor_pb2.FileDescriptorSet.FromString(DESCRIPTOR.read_bytes())
    found = set()
    for proto in files.file:
        for service in proto.service:
            if f"{proto.package}.{service.name}" not in SERVICES:
                continue
            for method in service.method:
                rule = method.options.Extensions[annotations_pb2.http]
                for r in [rule, *rule.additional_bindings]:
                    verb = r.WhichOneof("pattern")
                    found.add((verb, getattr(r, verb)))
    return found


def test_every_rest_binding_is_one_operation() -> None:
    operations = {(verb, path) for path, item in DOC["paths"].items() for verb in item}
    assert operations == _rest_bindings()
    assert len(operations) == 42
    ids = [op["operationId"] for item in DOC["paths"].values() for op in item.values()]
    assert len(ids) == len(set(ids))
    assert "MemoryService_RenameCharacter2" in ids  # the additional binding


def test_the_rendering_is_deterministic_and_one_entry_a_line() -> None:
    text = COMMITTED.read_text()
    assert text == openapi.render(json.loads(text))
    lines = text.splitlines()
    assert '    "/api/memory/{id}": {' in lines
    assert any(line.startswith('      "get": {"description":') for line in lines)
    assert any(line.startswith('      "memsvc.v1.Memory": {') for line in lines)
    assert text.isascii()


# ---- what the document says about memsvc's routes ------------------------------------------


def test_paths_query_parameters_and_bodies_follow_the_bindings() -> None:
    get = DOC["paths"]["/api/memory/{id}"]["get"]
    [param] = get["parameters"]
    assert param["in"] == "path" and param["required"] is True and param["schema"]["minLength"] == 1
    # Other GET routes with a literal where GetMemory has {id} are those routes, not an id.
    assert {"health", "engine-status", "recent_files"} <= set(param["schema"]["not"]["enum"])
    clear = DOC["paths"]["/api/memory"]["delete"]
    assert [(p["in"], p["name"]) for p in clear["parameters"]] == [
        ("query", "apiKeyId"),
        ("query", "type"),
        ("query", "sessionId"),
        ("query", "olderThan"),
    ]
    assert clear["parameters"][3]["schema"] == {"type": "string", "format": "date-time"}
    assert "requestBody" not in clear
    update = DOC["paths"]["/api/memory/{id}"]["put"]
    body = update["requestBody"]["content"]["application/json"]["schema"]
    assert "id" not in body["properties"] and "content" in body["properties"]  # id is in the path
    settings = DOC["paths"]["/api/settings/memory"]["put"]
    assert settings["requestBody"]["content"]["application/json"]["schema"] == {"type": "object"}  # body: "settings"
    assert "parameters" not in settings
    rename = DOC["paths"]["/api/characters/catgirl/{old_name}/rename"]["post"]
    body = rename["requestBody"]["content"]["application/json"]["schema"]
    assert set(body["properties"]) == {"new_name", "compat_alias"}


def test_a_server_stream_answers_a_json_array() -> None:
    reindex = DOC["paths"]["/api/memory/reindex"]["post"]["responses"]["200"]["content"]["application/json"]
    assert reindex["schema"] == {"type": "array", "items": {"$ref": "#/components/schemas/memsvc.v1.ReindexProgress"}}


def test_response_schemas_follow_the_print_options() -> None:
    memory = schema_of(DOC, "memsvc.v1.Memory")
    assert memory["required"] == ["id", "apiKeyId", "type", "content", "accessCount", "keep"]
    assert memory["additionalProperties"] is False
    assert memory["properties"]["createdAt"] == {"type": "string", "format": "date-time"}
    assert memory["properties"]["metadata"] == {"type": "object"}
    owners = schema_of(DOC, "memsvc.v1.WorkingSetStatus")["properties"]["owners"]
    assert owners["type"] == "string" and owners["pattern"] == "^-?[0-9]+$"  # int64 is printed as a string
    by_type = schema_of(DOC, "memsvc.v1.MemoryStats")["properties"]["byType"]
    assert by_type["type"] == "object" and by_type["additionalProperties"]["format"] == "int32"
    snake = schema_of(DOC, "memsvc.v1.GetRecentFileResponse")
    assert snake["required"] == ["content", "fingerprint", "identity_token"]
    paths = schema_of(DOC, "memsvc.v1.PurgeLegacyRequest")["properties"]["paths"]
    assert paths["type"] == "array" and "type" not in paths["items"]  # google.protobuf.Value: any JSON


def test_request_schemas_require_nothing_and_refuse_unknown_fields_except_chat_items() -> None:
    create = schema_of(DOC, "memsvc.v1.CreateMemoryRequest")
    assert "required" not in create and create["additionalProperties"] is False
    chat_item = schema_of(DOC, "memsvc.v1.ChatItem")
    assert "additionalProperties" not in chat_item  # the request guard lets chat items carry any key


def test_errors_and_security() -> None:
    error = schema_of(DOC, "Error")
    assert error["required"] == ["code", "message"] and set(error["properties"]) == {"code", "message", "details"}
    for item in DOC["paths"].values():
        for op in item.values():
            assert {"400", "401", "403", "404", "409", "429", "500", "503"} <= set(op["responses"])
    assert DOC["security"] == [{"bearerAuth": []}]
    assert DOC["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    me = DOC["paths"]["/api/credentials/me"]["get"]
    assert me["security"] == [{}, {"bearerAuth": []}]  # GetCaller: any caller, token or not
    assert "security" not in DOC["paths"]["/api/memory"]["get"]
    assert "`read:memory`" in DOC["paths"]["/api/memory"]["get"]["description"]


def _real_pool() -> Any:
    pool, _ = openapi.load_pool(DESCRIPTOR.read_bytes())
    return pool


def _response_messages() -> list[str]:
    return sorted(
        name
        for name, schema in DOC["components"]["schemas"].items()
        if "required" in schema and name.startswith(("memsvc.", "google.rpc."))
    )


@pytest.mark.parametrize("name", _response_messages())
def test_an_empty_response_message_as_printed_matches_its_schema(name: str) -> None:
    pool = _real_pool()
    message = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))()
    validator(DOC, name).validate(printed(message))


def test_filled_response_messages_as_printed_match_and_a_missing_field_is_caught() -> None:
    pool = _real_pool()
    classes = {
        n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"memsvc.v1.{n}"))
        for n in ("Memory", "EngineStatus")
    }
    memory = classes["Memory"](id="m1", api_key_id="k", session_id="s", type="factual", key="a", content="x")
    memory.metadata.update({"a": [1, "b", None, {"c": True}]})
    memory.created_at.seconds, memory.created_at.nanos = 1_700_000_000, 123_000_000
    memory.access_count = 3
    status = classes["EngineStatus"]()
    status.working_sets.owners = 2**40
    status.reindex.progress.state = "done"
    status.backends.add(name="local", latency_ms=0.5)
    for name, message in (("Memory", memory), ("EngineStatus", status)):
        validator(DOC, f"memsvc.v1.{name}").validate(printed(message))
    body = printed(memory)
    del body["accessCount"]
    with pytest.raises(ValidationError, match="accessCount"):
        validator(DOC, "memsvc.v1.Memory").validate(body)
    with pytest.raises(ValidationError):
        validator(DOC, "memsvc.v1.Memory").validate({**printed(memory), "api_key_id": "k"})


# ---- the route Envoy serves it on --------------------------------------------------------------


def test_envoy_serves_the_committed_document_inline() -> None:
    config = envoy_config.build(EnvoySettings.committed("gen/memsvc/v1/memsvc.pb"))
    manager = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    routes = manager["route_config"]["virtual_hosts"][0]["routes"]
    [route] = [r for r in routes if r["match"].get("path") == "/api/openapi.json"]
    body = route["direct_response"]["body"]["inline_string"]
    assert body == COMMITTED.read_text()
    assert manager["route_config"]["max_direct_response_body_size_bytes"] >= len(body.encode())
    # Before the catch-all route to memsvc, and outside the REST filters.
    assert routes.index(route) < routes.index(routes[-1])
    assert "envoy.filters.http.grpc_json_transcoder" in route["typed_per_filter_config"]


# ---- proto features memsvc's protos do not use --------------------------------------------------

DEMO_PROTO = """
syntax = "proto3";
package demo.v1;
import "google/api/annotations.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

// A service to test with.
service DemoService {
  // Gets a widget.
  rpc GetWidget(GetWidgetRequest) returns (Widget) {
    option (google.api.http) = {get: "/v1/widgets/{name}"};
  }
  rpc ListWidgets(ListWidgetsRequest) returns (ListWidgetsResponse) {
    option (google.api.http) = {get: "/v1/widgets" response_body: "widgets"};
  }
  rpc PutWidget(PutWidgetRequest) returns (Widget) {
    option (google.api.http) = {put: "/v1/widgets/{name}" body: "widget"};
  }
  rpc Watch(WatchRequest) returns (stream Widget) {
    option (google.api.http) = {post: "/v1/widgets:watch" body: "*"};
  }
}

enum Color {
  COLOR_UNSPECIFIED = 0;
  RED = 1;
}

// A widget.
message Widget {
  // Its name.
  string name = 1;
  int64 count = 2;
  uint64 big = 3;
  bytes blob = 4;
  Color color = 5;
  repeated int64 counts = 6;
  map<int32, Part> parts = 7;
  map<bool, string> flags = 8;
  oneof shape {
    double radius = 9;
    string side = 10;
  }
  google.protobuf.Duration ttl = 11;
  google.protobuf.Int64Value maybe = 12;
  optional float weight = 13;
  Part main = 14;
  sint32 delta = 15;
  fixed32 mask = 16;
}

message Part {
  string id = 1;
  repeated Part children = 2;
}

message GetWidgetRequest {
  string name = 1;
  Filter filter = 2;
  repeated Color colors = 3;
  google.protobuf.Timestamp since = 4;
  map<string, string> labels = 5;
}

message Filter {
  string prefix = 1;
  Filter deeper = 2;
}

message ListWidgetsRequest {
  int32 page_size = 1;
}

message ListWidgetsResponse {
  repeated Widget widgets = 1;
}

message PutWidgetRequest {
  string name = 1;
  Widget widget = 2;
}

message WatchRequest {
  string name = 1;
}
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Any]:
    """The demo proto compiled as scripts/generate.py compiles memsvc's (source info included,
    for the comments), its document, and its pool."""
    spec = importlib.util.spec_from_file_location("generate", ROOT / "scripts" / "generate.py")
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    folder = tmp_path_factory.mktemp("demo-proto")
    (folder / "demo.proto").write_text(DEMO_PROTO)
    out = folder / "demo.pb"
    includes = [str(folder), *generate._include_dirs()[1:]]
    args = ["protoc", *[f"-I{d}" for d in includes], f"--descriptor_set_out={out}", "--include_imports"]
    # google.rpc.Status: the error body (Envoy needs it in the set to print errors, too).
    assert protoc.main([*args, "--include_source_info", "demo.proto", "google/rpc/status.proto"]) == 0
    doc = openapi.document(out.read_bytes(), ("demo.v1.DemoService",))
    return doc, openapi.load_pool(out.read_bytes())[0]


def test_the_demo_document_is_valid_openapi(demo: tuple[dict[str, Any], Any]) -> None:
    doc, _ = demo
    OpenAPIV31SpecValidator(doc).validate()
    assert doc["info"]["version"] == "v1"


def test_scalars_enums_maps_oneofs_and_wrappers(demo: tuple[dict[str, Any], Any]) -> None:
    doc, _ = demo
    widget = schema_of(doc, "demo.v1.Widget")
    props = widget["properties"]
    assert widget["required"] == [
        "name",
        "count",
        "big",
        "blob",
        "color",
        "counts",
        "parts",
        "flags",
        "delta",
        "mask",
    ]  # no presence: always printed; the oneof members, messages, wrappers and `optional` only when set
    assert props["count"] == {"type": "string", "format": "int64", "pattern": "^-?[0-9]+$"}
    assert props["big"]["pattern"] == "^[0-9]+$"
    assert props["blob"] == {"type": "string", "contentEncoding": "base64"}
    assert props["color"]["enum"] == ["COLOR_UNSPECIFIED", "RED"]
    assert props["counts"]["items"]["type"] == "string"
    assert props["parts"]["propertyNames"] == {"pattern": "^-?[0-9]+$"}
    assert props["parts"]["additionalProperties"] == {"$ref": "#/components/schemas/demo.v1.Part"}
    assert props["flags"]["propertyNames"] == {"enum": ["true", "false"]}
    assert widget["allOf"] == [{"not": {"required": ["radius", "side"]}}]
    assert props["ttl"]["type"] == "string" and props["maybe"]["type"] == "string"
    assert props["mask"]["minimum"] == 0
    # Widget is read (PutWidget's body) and printed: the request side has its own schema.
    request_widget = schema_of(doc, "demo.v1.WidgetInput")
    assert "required" not in request_widget
    assert request_widget["properties"]["count"]["anyOf"][1] == {"type": "integer", "format": "int64"}


def test_demo_messages_as_printed_match_their_schemas(demo: tuple[dict[str, Any], Any]) -> None:
    doc, pool = demo
    widget_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("demo.v1.Widget"))
    full = widget_class(name="w", count=-(2**40), big=2**63, blob=b"\x00\xff", color=1, counts=[1, 2**50])
    full.parts[7].children.add(id="c")
    full.flags[True] = "yes"
    full.radius = 0.5
    full.ttl.FromSeconds(90)
    full.maybe.value = 2**40
    full.weight = 1.5
    full.main.id = "m"
    for message in (widget_class(), full):
        validator(doc, "demo.v1.Widget").validate(printed(message))
    both = printed(full)
    both["side"] = "also set"
    with pytest.raises(ValidationError):
        validator(doc, "demo.v1.Widget").validate(both)


def test_query_parameters_response_body_and_streams(demo: tuple[dict[str, Any], Any]) -> None:
    doc, _ = demo
    get = doc["paths"]["/v1/widgets/{name}"]["get"]
    names = [p["name"] for p in get["parameters"]]
    assert names[0] == "name" and get["parameters"][0]["in"] == "path"
    # Nested messages as dotted names, four levels at most; maps are not query parameters.
    assert names[1:] == [
        "filter.prefix",
        "filter.deeper.prefix",
        "filter.deeper.deeper.prefix",
        "filter.deeper.deeper.deeper.prefix",
        "colors",
        "since",
    ]
    colors = get["parameters"][5]["schema"]
    assert colors["type"] == "array" and colors["items"]["enum"] == ["COLOR_UNSPECIFIED", "RED"]
    listed = doc["paths"]["/v1/widgets"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert listed == {"type": "array", "items": {"$ref": "#/components/schemas/demo.v1.Widget"}}
    put = doc["paths"]["/v1/widgets/{name}"]["put"]
    assert put["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/demo.v1.WidgetInput"
    }
    assert [p["name"] for p in put["parameters"]] == ["name"]
    watch = doc["paths"]["/v1/widgets:watch"]["post"]["responses"]["200"]["content"]["application/json"]
    assert watch["schema"]["type"] == "array"


def test_descriptions_come_from_the_proto_comments(demo: tuple[dict[str, Any], Any]) -> None:
    doc, _ = demo
    assert doc["tags"] == [{"name": "DemoService", "description": "A service to test with."}]
    assert doc["paths"]["/v1/widgets/{name}"]["get"]["description"].startswith("Gets a widget.\n\ngRPC: ")
    widget = schema_of(doc, "demo.v1.Widget")
    assert widget["description"] == "A widget."
    assert widget["properties"]["name"]["description"] == "Its name."
