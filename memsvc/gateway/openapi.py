"""The OpenAPI 3.1 document of the REST surface, derived from the descriptor set Envoy's
gRPC-JSON transcoder loads (gen/memsvc/v1/memsvc.pb), so the document and the routes Envoy
serves cannot drift: one `google.api.http` binding is one operation.

What the transcoder does, and so what the document says:

- A path template's `{field}` is a path parameter. With `body: "*"` every other field is in
  the JSON body; with `body: "field"` that field is the body; the fields neither binds are
  query parameters (their JSON names; a message field as `field.sub`, a repeated one given
  once per value).
- JSON as Envoy prints it (`envoy_config._transcoder`'s print options): lowerCamelCase
  json_names (or the explicit json_name), every field without presence always printed (a
  zero, an empty list or map: `required` in a response), fields with presence (proto3
  `optional`, messages, oneof members) only when set; 64-bit integers as strings, enums by
  name, the well-known types in their JSON forms (Timestamp an RFC 3339 string, Struct an
  object, Value any JSON, Any an object with `@type`).
- A server-streaming RPC answers one JSON array of its messages; errors are
  `google.rpc.Status` JSON (`code`, `message`, `details`) with the HTTP status of the code.
- Who may call: the permission of `memsvc.api.access`'s rule table, and the bearer token.

Request schemas list no required field (proto3 has none; memsvc validates and answers 400)
and refuse unknown fields, as the request guard does (chat items excepted: they take any key).
`render` is deterministic: keys sorted, ASCII, one operation and one schema a line.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.api import annotations_pb2, http_pb2
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor

from memsvc.gateway import request_guard

OPENAPI_VERSION = "3.1.0"
JSON = "application/json"
SECURITY_SCHEME = "bearerAuth"
# The path Envoy serves the document at (envoy_config's route).
DOCUMENT_PATH = "/api/openapi.json"
# Relative descriptor paths (deploy/envoy.yaml's) are relative to the repository root.
ROOT = Path(__file__).resolve().parents[2]
_VERBS = ("get", "put", "post", "delete", "patch")
_VARIABLE = re.compile(r"\{([^}=]+)(?:=([^}]*))?\}")

# The errors every operation may answer: memsvc's gRPC status as Envoy maps it to HTTP
# (docs/errors.md), or Envoy's and the request guard's own refusals, all with the same body.
ERRORS: dict[int, tuple[str, str]] = {
    400: ("BadRequest", "INVALID_ARGUMENT, FAILED_PRECONDITION or OUT_OF_RANGE; unparsable JSON, an unknown field"),
    401: ("Unauthorized", "UNAUTHENTICATED: no bearer token, or one that is not valid"),
    403: ("Forbidden", "PERMISSION_DENIED: the token may not do this (tenant, permission, character memory)"),
    404: ("NotFound", "NOT_FOUND: no such memory, file, character or credential"),
    409: ("Conflict", "ABORTED or ALREADY_EXISTS: a conflict; `ErrorInfo.reason` in `details` says which"),
    413: ("PayloadTooLarge", "the request body is over the gateway's limit"),
    414: ("URITooLong", "the URL (path and query) is over 8192 bytes"),
    415: ("UnsupportedMediaType", "a request body not sent as content-type: application/json"),
    429: ("TooManyRequests", "RESOURCE_EXHAUSTED: a limit, or the data directory's disk is full"),
    431: ("RequestHeaderFieldsTooLarge", "the request headers are over 32 KiB in all"),
    500: ("InternalServerError", "INTERNAL: a bug or a failed multi-step operation; the message says which"),
    503: ("ServiceUnavailable", "UNAVAILABLE: memsvc or a dependency it needs is down; retry"),
    504: ("GatewayTimeout", "DEADLINE_EXCEEDED"),
}
# The HTTP error body's schema (components/schemas).
ERROR_SCHEMA = "Error"

_INT32 = {"type": "integer", "format": "int32", "minimum": -(2**31), "maximum": 2**31 - 1}
_UINT32 = {"type": "integer", "format": "uint32", "minimum": 0, "maximum": 2**32 - 1}
_NUMBER = {"type": "number", "format": "double"}
_FLOAT = {"type": "number", "format": "float"}
_BYTES = {"type": "string", "contentEncoding": "base64"}
_T = FieldDescriptor
_SCALARS: dict[int, dict[str, Any]] = {
    _T.TYPE_DOUBLE: _NUMBER,
    _T.TYPE_FLOAT: _FLOAT,
    _T.TYPE_INT32: _INT32,
    _T.TYPE_SINT32: _INT32,
    _T.TYPE_SFIXED32: _INT32,
    _T.TYPE_UINT32: _UINT32,
    _T.TYPE_FIXED32: _UINT32,
    _T.TYPE_BOOL: {"type": "boolean"},
    _T.TYPE_STRING: {"type": "string"},
    _T.TYPE_BYTES: _BYTES,
}
_SIGNED_64 = (_T.TYPE_INT64, _T.TYPE_SINT64, _T.TYPE_SFIXED64)
_UNSIGNED_64 = (_T.TYPE_UINT64, _T.TYPE_FIXED64)


def _int64(signed: bool, response: bool) -> dict[str, Any]:
    """A 64-bit integer: printed as a decimal string; a request may send a number too."""
    text = {
        "type": "string",
        "format": "int64" if signed else "uint64",
        "pattern": "^-?[0-9]+$" if signed else "^[0-9]+$",
    }
    if response:
        return text
    return {"anyOf": [text, {"type": "integer", "format": "int64" if signed else "uint64"}]}


# The well-known types' JSON forms (the proto3 JSON mapping).
_WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]{1,9})?s$"},
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.Value": {"description": "Any JSON value."},
    "google.protobuf.ListValue": {"type": "array"},
    "google.protobuf.Empty": {"type": "object", "additionalProperties": False},
    "google.protobuf.FieldMask": {"type": "string"},
    "google.protobuf.Any": {
        "type": "object",
        "properties": {"@type": {"type": "string"}},
        "required": ["@type"],
        "description": "A message with its type URL (`@type`), such as type.googleapis.com/google.rpc.ErrorInfo.",
    },
    "google.protobuf.BoolValue": {"type": "boolean"},
    "google.protobuf.StringValue": {"type": "string"},
    "google.protobuf.BytesValue": _BYTES,
    "google.protobuf.Int32Value": _INT32,
    "google.protobuf.UInt32Value": _UINT32,
    "google.protobuf.DoubleValue": _NUMBER,
    "google.protobuf.FloatValue": _FLOAT,
}
_WELL_KNOWN_64 = {"google.protobuf.Int64Value": True, "google.protobuf.UInt64Value": False}


def load_pool(descriptor_set: bytes) -> tuple[descriptor_pool.DescriptorPool, descriptor_pb2.FileDescriptorSet]:
    """A fresh descriptor pool holding every file of a descriptor set (`--include_imports`)."""
    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set)
    pool = descriptor_pool.DescriptorPool()
    for proto in files.file:
        pool.Add(proto)
    return pool, files


def comments(files: descriptor_pb2.FileDescriptorSet) -> dict[str, str]:
    """Leading comments by full name (messages, fields, services, methods), when the set
    was built with --include_source_info; empty otherwise."""
    found: dict[str, str] = {}
    for proto in files.file:
        names = _location_names(proto)
        for location in proto.source_code_info.location:
            name = names.get(tuple(location.path))
            text = location.leading_comments.strip()
            if name and text:
                found[name] = "\n".join(line.strip() for line in text.splitlines())
    return found


def _location_names(proto: descriptor_pb2.FileDescriptorProto) -> dict[tuple[int, ...], str]:
    """SourceCodeInfo paths (descriptor.proto's field numbers) to the full names they locate."""
    names: dict[tuple[int, ...], str] = {}

    def message(path: tuple[int, ...], msg: descriptor_pb2.DescriptorProto, prefix: str) -> None:
        full = f"{prefix}.{msg.name}"
        names[path] = full
        for i, f in enumerate(msg.field):
            names[(*path, 2, i)] = f"{full}.{f.name}"
        for i, nested in enumerate(msg.nested_type):
            message((*path, 3, i), nested, full)

    for i, msg in enumerate(proto.message_type):
        message((4, i), msg, proto.package)
    for i, service in enumerate(proto.service):
        names[(6, i)] = f"{proto.package}.{service.name}"
        for j, method in enumerate(service.method):
            names[(6, i, 2, j)] = f"{proto.package}.{service.name}.{method.name}"
    return names


@dataclass(frozen=True)
class Binding:
    """One REST binding of an RPC: its HTTP method, path template and body selector."""

    method: MethodDescriptor
    verb: str
    template: str
    body: str
    response_body: str
    index: int  # 0 for the rule itself, 1.. for its additional_bindings

    @property
    def path_fields(self) -> list[str]:
        return [m.group(1) for m in _VARIABLE.finditer(self.template)]

    @property
    def operation_id(self) -> str:
        name = f"{self.method.containing_service.name}_{self.method.name}"
        return name if self.index == 0 else f"{name}{self.index + 1}"

    def segments(self) -> list[str]:
        return self.template.strip("/").split("/")


def bindings(method: MethodDescriptor) -> list[Binding]:
    """Every binding of `method`'s google.api.http rule, additional_bindings included."""
    options = method.GetOptions()
    if not options.HasExtension(annotations_pb2.http):
        return []
    rule = options.Extensions[annotations_pb2.http]
    out = []
    for index, r in enumerate([rule, *rule.additional_bindings]):
        out.append(_binding(method, r, index))
    return out


def _binding(method: MethodDescriptor, rule: http_pb2.HttpRule, index: int) -> Binding:
    pattern = rule.WhichOneof("pattern")
    if pattern == "custom":
        verb, template = rule.custom.kind.lower(), rule.custom.path
    elif pattern in _VERBS:
        verb, template = str(pattern), getattr(rule, pattern)
    else:
        raise ValueError(f"{method.full_name}: a google.api.http rule without a path")
    for segment in template.strip("/").split("/"):
        match = _VARIABLE.search(segment)
        if match and (match.group(0) != segment or match.group(2) not in (None, "*") or "." in match.group(1)):
            raise ValueError(f"{method.full_name}: path segment {segment} is not one field's whole segment")
    return Binding(method, verb, template, rule.body, rule.response_body, index)


def _proto3_optional(files: descriptor_pb2.FileDescriptorSet) -> frozenset[str]:
    """Full names of the proto3 `optional` fields, whose oneofs are synthetic (not real ones)."""
    found: set[str] = set()

    def walk(msg: descriptor_pb2.DescriptorProto, prefix: str) -> None:
        full = f"{prefix}.{msg.name}"
        found.update(f"{full}.{f.name}" for f in msg.field if f.proto3_optional)
        for nested in msg.nested_type:
            walk(nested, full)

    for proto in files.file:
        for msg in proto.message_type:
            walk(msg, proto.package)
    return frozenset(found)


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _message_of(field: FieldDescriptor) -> Descriptor:
    if field.message_type is None:
        raise ValueError(f"{field.full_name} is not a message field")
    return field.message_type


class _Components:
    """components/schemas: one per message as a request reads it and one as a response
    prints it (the same schema when a message is used only one way); well-known types inline."""

    def __init__(self, docs: dict[str, str], optional: frozenset[str], both_ways: frozenset[str]):
        self.schemas: dict[str, dict[str, Any]] = {}
        self._docs = docs
        self._optional = optional
        self._both_ways = both_ways

    def name(self, msg: Descriptor, response: bool) -> str:
        if msg.full_name in self._both_ways and not response:
            return f"{msg.full_name}Input"
        return msg.full_name

    def message(self, msg: Descriptor, response: bool) -> dict[str, Any]:
        """A message's schema: a well-known type's JSON form, else a $ref to its component."""
        if msg.full_name in _WELL_KNOWN:
            return dict(_WELL_KNOWN[msg.full_name])
        if msg.full_name in _WELL_KNOWN_64:
            return _int64(_WELL_KNOWN_64[msg.full_name], response)
        name = self.name(msg, response)
        if name not in self.schemas:
            self.schemas[name] = {}  # claimed first: a message may contain itself
            self.schemas[name] = self.object_schema(msg, response)
        return {"$ref": f"#/components/schemas/{name}"}

    def object_schema(self, msg: Descriptor, response: bool) -> dict[str, Any]:
        """The JSON object of a message (not a well-known type)."""
        schema: dict[str, Any] = {"type": "object", "properties": self.properties(msg, response)}
        if response or msg.full_name not in request_guard.OPEN_MESSAGES:
            schema["additionalProperties"] = False
        if response:
            required = [f.json_name for f in msg.fields if not f.has_presence]
            if required:
                schema["required"] = required
        oneofs = [o for o in msg.oneofs if not self._synthetic(o.fields)]
        exclusive = [
            {"not": {"required": [a.json_name, b.json_name]}}
            for o in oneofs
            for i, a in enumerate(o.fields)
            for b in o.fields[i + 1 :]
        ]
        if exclusive:
            schema["allOf"] = exclusive
        if msg.full_name in self._docs:
            schema["description"] = self._docs[msg.full_name]
        schema["title"] = msg.full_name
        return schema

    def _synthetic(self, fields: Any) -> bool:
        return len(fields) == 1 and fields[0].full_name in self._optional

    def properties(self, msg: Descriptor, response: bool, skip: tuple[str, ...] = ()) -> dict[str, Any]:
        out = {}
        for f in msg.fields:
            if f.name in skip:
                continue
            schema = self.field(f, response)
            if f.full_name in self._docs:
                schema = {**schema, "description": self._docs[f.full_name]}
            out[f.json_name] = schema
        return out

    def field(self, field: FieldDescriptor, response: bool) -> dict[str, Any]:
        """A field's JSON value: a map is an object, a repeated field a list."""
        if _is_map(field):
            entry = _message_of(field)
            key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
            schema: dict[str, Any] = {"type": "object", "additionalProperties": self.single(value, response)}
            if key.type == _T.TYPE_BOOL:
                schema["propertyNames"] = {"enum": ["true", "false"]}
            elif key.type != _T.TYPE_STRING:
                schema["propertyNames"] = {"pattern": "^-?[0-9]+$"}
            return schema
        if field.is_repeated:
            return {"type": "array", "items": self.single(field, response)}
        return self.single(field, response)

    def single(self, field: FieldDescriptor, response: bool) -> dict[str, Any]:
        """One value of a field, whatever its cardinality."""
        if field.type == _T.TYPE_MESSAGE or field.type == _T.TYPE_GROUP:
            return self.message(_message_of(field), response)
        if field.type == _T.TYPE_ENUM and field.enum_type is not None:
            enum = field.enum_type
            if enum.full_name == "google.protobuf.NullValue":
                return {"type": "null"}
            return {"type": "string", "enum": [v.name for v in enum.values], "title": enum.full_name}
        if field.type in _SIGNED_64 or field.type in _UNSIGNED_64:
            return _int64(field.type in _SIGNED_64, response)
        return dict(_SCALARS[field.type])


def _reachable(msg: Descriptor, seen: set[str]) -> set[str]:
    """`msg` and every message its fields contain (well-known types excluded)."""
    if msg.full_name in seen or msg.full_name in _WELL_KNOWN or msg.full_name in _WELL_KNOWN_64:
        return seen
    seen.add(msg.full_name)
    for f in msg.fields:
        if f.message_type is not None:
            _reachable(f.message_type, seen)
    return seen


def _both_ways(all_bindings: list[Binding]) -> frozenset[str]:
    """Messages that appear in a request and in a response (each way gets its own schema)."""
    inputs: set[str] = set()
    outputs: set[str] = set()
    for b in all_bindings:
        _reachable(b.method.input_type, inputs)
        _reachable(b.method.output_type, outputs)
    return frozenset(inputs & outputs)


class _Operations:
    """paths: one operation per binding."""

    def __init__(self, components: _Components, all_bindings: list[Binding], docs: dict[str, str]):
        self.components = components
        self._bindings = all_bindings
        self._docs = docs

    def operation(self, b: Binding) -> dict[str, Any]:
        method = b.method
        service = method.containing_service
        op: dict[str, Any] = {
            "operationId": b.operation_id,
            "tags": [service.name],
            "summary": f"{service.name}.{method.name}",
            "description": self._description(b),
            "responses": self._responses(b),
        }
        parameters = self._path_parameters(b) + self._query_parameters(b)
        if parameters:
            op["parameters"] = parameters
        if b.body:
            op["requestBody"] = self._request_body(b)
        security = _security(method)
        if security is not None:
            op["security"] = security
        return op

    def _description(self, b: Binding) -> str:
        method = b.method
        parts = [self._docs[method.full_name]] if method.full_name in self._docs else []
        parts.append(f"gRPC: `/{method.containing_service.full_name}/{method.name}`. {_permission(method)}")
        if method.server_streaming:
            parts.append("A server stream: the answer is one JSON array of its messages.")
        return "\n\n".join(parts)

    def _responses(self, b: Binding) -> dict[str, Any]:
        output = b.method.output_type
        if b.response_body:
            schema = self.components.field(output.fields_by_name[b.response_body], response=True)
            title = f"{output.full_name}.{b.response_body}"
        else:
            schema, title = self.components.message(output, response=True), output.full_name
        if b.method.server_streaming:
            schema = {"type": "array", "items": schema}
        ok = {"description": title, "content": {JSON: {"schema": schema}}}
        errors = {str(code): {"$ref": f"#/components/responses/{name}"} for code, (name, _) in ERRORS.items()}
        return {"200": ok, **errors}

    def _request_body(self, b: Binding) -> dict[str, Any]:
        request = b.method.input_type
        if b.body == "*" and b.path_fields:
            schema = self._without(request, tuple(b.path_fields))
        elif b.body == "*":
            schema = self.components.message(request, response=False)
        else:
            schema = self.components.field(request.fields_by_name[b.body], response=False)
        if b.method.client_streaming:
            schema = {"type": "array", "items": schema}
        # Not required: the transcoder reads a request without a body as the empty message.
        return {"content": {JSON: {"schema": schema}}}

    def _without(self, request: Descriptor, path_fields: tuple[str, ...]) -> dict[str, Any]:
        """The request message less the fields its path binds, inline."""
        schema = self.components.object_schema(request, response=False)
        schema["properties"] = self.components.properties(request, False, skip=path_fields)
        schema["title"] = f"{request.full_name} (less {', '.join(path_fields)}: in the path)"
        return schema

    def _path_parameters(self, b: Binding) -> list[dict[str, Any]]:
        out = []
        for i, segment in enumerate(b.segments()):
            match = _VARIABLE.fullmatch(segment)
            if match is None:
                continue
            field = b.method.input_type.fields_by_name[match.group(1)]
            schema = self.components.single(field, response=False)
            if schema.get("type") == "string":
                schema["minLength"] = 1
            taken = self._literals_at(b, i)
            if taken:
                schema["not"] = {"enum": taken}
            out.append({"name": field.name, "in": "path", "required": True, "schema": schema})
        return out

    def _literals_at(self, b: Binding, i: int) -> list[str]:
        """The literal segments other bindings of the same HTTP method have where `b` has its
        one path variable: a path with one of them is that other route (`/api/memory/health`
        is CheckHealth, not GetMemory), so the variable never takes them."""
        mine = b.segments()
        if len(b.path_fields) != 1:
            return []
        taken = set()
        for other in self._bindings:
            theirs = other.segments()
            if other is b or other.verb != b.verb or len(theirs) != len(mine) or _VARIABLE.search(theirs[i]):
                continue
            if all(theirs[j] == mine[j] for j in range(len(mine)) if j != i):
                taken.add(theirs[i])
        return sorted(taken)

    def _query_parameters(self, b: Binding) -> list[dict[str, Any]]:
        if b.body == "*":
            return []
        bound = {*b.path_fields, b.body}
        return self._query(b.method.input_type, bound, "", 0)

    def _query(self, msg: Descriptor, bound: set[str], prefix: str, depth: int) -> list[dict[str, Any]]:
        """The fields a query string may set: scalars, repeated scalars and the well-known
        types with a string form, nested messages as `field.sub` (not maps, nor free-form JSON)."""
        out: list[dict[str, Any]] = []
        for f in msg.fields:
            if (not prefix and f.name in bound) or _is_map(f):
                continue
            name = prefix + f.json_name
            kind = f.message_type.full_name if f.message_type is not None else ""
            if kind and kind not in _WELL_KNOWN and kind not in _WELL_KNOWN_64:
                if not f.is_repeated and depth < 4:
                    out += self._query(_message_of(f), bound, f"{name}.", depth + 1)
                continue
            if kind in ("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"):
                continue
            if kind in ("google.protobuf.Any", "google.protobuf.Empty"):
                continue
            param: dict[str, Any] = {"name": name, "in": "query", "schema": self.components.field(f, response=False)}
            if f.full_name in self._docs:
                param["description"] = self._docs[f.full_name]
            out.append(param)
        return out


def _rules() -> dict[str, Any]:
    from memsvc.api.access import RULES

    return RULES


def _permission(method: MethodDescriptor) -> str:
    from memsvc.api.access import ANYONE

    rule = _rules().get(f"/{method.containing_service.full_name}/{method.name}")
    if rule is None:
        return "No access rule: memsvc refuses it."
    if rule.permission == ANYONE:
        return "Any caller, with or without a token."
    characters = ", with character memory access" if rule.characters else ""
    return f"Needs a token with `{rule.permission}`{characters} (an admin token may do everything)."


def _security(method: MethodDescriptor) -> list[dict[str, list[str]]] | None:
    """Anyone's calls take a token or none; every other call the document's bearer token."""
    from memsvc.api.access import ANYONE

    rule = _rules().get(f"/{method.containing_service.full_name}/{method.name}")
    if rule is not None and rule.permission == ANYONE:
        return [{}, {SECURITY_SCHEME: []}]
    return None


_ERROR_DESCRIPTION = (
    "The error body, google.rpc.Status as JSON: `code` is the gRPC status code, `message` says "
    "what is wrong, and `details` (when memsvc sent any) holds google.rpc.ErrorInfo (its `reason`), "
    "google.rpc.BadRequest (every field violation) and the like. Envoy's own refusals (an unknown "
    "path or query parameter, a body that is not JSON) have `code` and `message` alone."
)
_AUTH_DESCRIPTION = (
    "`Authorization: Bearer <token>`: an admin token of MEMSVC_API_TOKENS or a stored credential's "
    "token (`msk_...`). A server started without tokens and without credentials accepts every call "
    "without one (and listens on loopback only)."
)


def document(descriptor_set: bytes, services: tuple[str, ...]) -> dict[str, Any]:
    """The OpenAPI document of every REST binding of `services`."""
    pool, files = load_pool(descriptor_set)
    docs = comments(files)
    methods = [m for name in services for m in pool.FindServiceByName(name).methods]
    all_bindings = [b for m in methods for b in bindings(m)]
    components = _Components(docs, _proto3_optional(files), _both_ways(all_bindings))
    paths = _paths(_Operations(components, all_bindings, docs), all_bindings)
    components.schemas[ERROR_SCHEMA] = _error_schema(pool, components)
    package = services[0].rsplit(".", 1)[0]
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "memsvc REST API",
            "version": package.rsplit(".", 1)[-1],
            "description": (
                f"The REST surface of the gRPC contract ({package}), served by Envoy's gRPC-JSON "
                "transcoder. Generated from the protos' google.api.http annotations "
                "(memsvc.gateway.openapi); do not edit."
            ),
        },
        "servers": [{"url": "/"}],
        "tags": [_tag(pool.FindServiceByName(name), docs) for name in services],
        "security": [{SECURITY_SCHEME: []}],
        "paths": paths,
        "components": {
            "schemas": components.schemas,
            "responses": _error_responses(),
            "securitySchemes": {
                SECURITY_SCHEME: {"type": "http", "scheme": "bearer", "description": _AUTH_DESCRIPTION}
            },
        },
    }


def _paths(operations: _Operations, all_bindings: list[Binding]) -> dict[str, dict[str, Any]]:
    paths: dict[str, dict[str, Any]] = {}
    for b in all_bindings:
        path = _VARIABLE.sub(lambda m: "{" + m.group(1) + "}", b.template)
        if b.verb in paths.get(path, {}):
            raise ValueError(f"{b.verb.upper()} {path} is bound twice")
        paths.setdefault(path, {})[b.verb] = operations.operation(b)
    return paths


def _error_schema(pool: descriptor_pool.DescriptorPool, components: _Components) -> dict[str, Any]:
    """google.rpc.Status as the HTTP error body: `details` only when memsvc sent some."""
    try:
        status = pool.FindMessageTypeByName("google.rpc.Status")
    except KeyError:
        raise ValueError("the descriptor set lacks google/rpc/status.proto, the error body's message") from None
    return {
        "type": "object",
        "title": status.full_name,
        "description": _ERROR_DESCRIPTION,
        "properties": components.properties(status, response=True),
        "required": ["code", "message"],
        "additionalProperties": False,
    }


def _tag(service: Any, docs: dict[str, str]) -> dict[str, str]:
    tag = {"name": service.name}
    if service.full_name in docs:
        tag["description"] = docs[service.full_name]
    return tag


def _error_responses() -> dict[str, Any]:
    schema = {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}
    return {
        name: {"description": f"{code}: {text}", "content": {JSON: {"schema": schema}}}
        for code, (name, text) in ERRORS.items()
    }


# Objects nested less deep than this are written one key a line; deeper values on one line.
_EXPANDED_DEPTH = 3


def render(doc: dict[str, Any]) -> str:
    """The document as committed and served: keys sorted, ASCII, one operation (paths.<path>.<method>)
    and one schema (components.<kind>.<name>) a line, so a change to one shows as that line;
    compact within a line, so the copy Envoy serves (inline in its config) stays small."""
    return _render(doc, 0) + "\n"


def _render(value: Any, depth: int) -> str:
    if not isinstance(value, dict) or not value or depth >= _EXPANDED_DEPTH:
        return json.dumps(value, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    pad = "  " * (depth + 1)
    items = [f"{pad}{json.dumps(k, ensure_ascii=True)}: {_render(value[k], depth + 1)}" for k in sorted(value)]
    return "{\n" + ",\n".join(items) + "\n" + "  " * depth + "}"


def descriptor_file(descriptor_path: str) -> Path:
    """`descriptor_path` as a file: relative to the repository root when relative."""
    path = Path(descriptor_path)
    return path if path.is_absolute() else ROOT / path


def render_file(descriptor_path: str, services: tuple[str, ...]) -> str:
    """The rendered document of the descriptor set at `descriptor_path` (read once per version of the file)."""
    path = descriptor_file(descriptor_path)
    stat = path.stat()
    return _render_cached(str(path), stat.st_mtime_ns, stat.st_size, services)


@functools.lru_cache(maxsize=8)
def _render_cached(path: str, mtime_ns: int, size: int, services: tuple[str, ...]) -> str:
    return render(document(Path(path).read_bytes(), services))


def write(descriptor_path: Path, out: Path) -> Path:
    """Writes the document of the descriptor set at `descriptor_path` to `out` (scripts/generate.py)."""
    from memsvc.gateway.envoy_config import SERVICES

    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(document(descriptor_path.read_bytes(), SERVICES)))
    return out
