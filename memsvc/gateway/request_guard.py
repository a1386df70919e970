"""Checks Envoy makes on a REST request before the transcoder sees it: who may call (the
`Host` and `Origin` rule of memsvc.kernel.web_access, also applied to /mcp), that a body is
declared JSON, the URL length, and that a JSON body names only fields the request message has.

Why the content type: a web page may send a cross-origin POST without asking first only as
text/plain, a form or multipart; the transcoder reads any body as JSON whatever it is declared
as, so without this check a page the user opens could write to a tokenless server. A JSON
content type makes the browser ask first (a CORS preflight), which memsvc never answers.

Why here: the transcoder drops unknown JSON body fields by design (its JSON parser is built
with unknown fields ignored, and no option turns that off), so a misspelled `expiresAT`
would silently create a memory that never expires, and memsvc never sees the name. The field
lists come from the same descriptors the transcoder loads, so the check and the contract
cannot drift. A URL is limited because the transcoder forwards it to memsvc as a header
(`x-envoy-original-path`); past the limit the answer is 414, not a confusing
RESOURCE_EXHAUSTED from gRPC's metadata limit.

The check runs as a Lua filter (Envoy's own, no extra process). A body must be strict JSON
(RFC 8259) outside its strings: the transcoder's parser also takes form feeds, single quotes,
bare keys and trailing commas, and a check that read those differently from it could be
walked past. Whatever else is wrong with a strict body (a wrong type, a bad value) is left to
the transcoder and memsvc.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from collections.abc import Iterable
from typing import Any

from google.api import annotations_pb2
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor

import memsvc.v1
from memsvc.kernel.web_access import WebAccess

# The longest request target (path and query string, in bytes as sent) a client may use.
MAX_URL_BYTES = 8192
# Objects and arrays nested deeper than this are not walked (the transcoder refuses depth
# 100 on its own; memsvc validates metadata depth itself).
MAX_WALK_DEPTH = 128
# Messages whose JSON objects may carry fields the message lacks (they are dropped): chat
# items, which clients send as they hold them, with keys memsvc does not store.
OPEN_MESSAGES = frozenset({"memsvc.v1.ChatItem"})
# Well-known types that are free-form JSON: any key is legitimate inside them.
FREE_FORM = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue", "google.protobuf.Any"}
)
# Set on a request the guard refuses, so the local-reply rewriting leaves its reply alone (a
# client's own header of this name is removed first).
GUARD_HEADER = "x-memsvc-guard"
_VERBS = ("get", "put", "post", "delete", "patch")


def service_methods(service_names: Iterable[str]) -> list[MethodDescriptor]:
    """Every method of the named services, as the generated modules describe them (each
    module is imported, so a service added later is found by its name alone)."""
    for info in pkgutil.iter_modules(memsvc.v1.__path__):
        if info.name.endswith("_pb2"):
            importlib.import_module(f"memsvc.v1.{info.name}")
    pool = descriptor_pool.Default()
    return [m for name in service_names for m in pool.FindServiceByName(name).methods]


def _bindings(method: MethodDescriptor) -> list[tuple[str, str, str]]:
    """(HTTP method, path template, body selector) of every REST binding of `method`."""
    rule = method.GetOptions().Extensions[annotations_pb2.http]
    out = []
    for r in [rule, *rule.additional_bindings]:
        verb = r.WhichOneof("pattern")
        if verb in _VERBS:
            out.append((verb.upper(), getattr(r, verb), r.body))
    return out


def _lua_pattern(template: str) -> str:
    """A Lua pattern for a path template: `{var}` is one segment; a trailing slash is
    tolerated, as the transcoder tolerates it."""
    parts = re.split(r"(\{[^}]*\})", template)
    body = "".join("[^/]+" if p.startswith("{") else re.sub(r"([^\w/])", r"%\1", p) for p in parts if p)
    return f"^{body}/?$"


def _child(field: FieldDescriptor, schemas: dict[str, dict[str, Any]]) -> Any:
    """What a field's JSON value is checked against: a message name, a map marker, or
    False (a scalar or free-form value: nothing inside it is checked)."""
    msg = field.message_type
    if msg is None:
        return False
    if msg.GetOptions().map_entry:
        return {"map": _child(msg.fields_by_name["value"], schemas)}
    if msg.full_name in FREE_FORM or msg.full_name.startswith("google.protobuf."):
        return False
    _schema(msg, schemas)
    return msg.full_name


def _schema(msg: Descriptor, schemas: dict[str, dict[str, Any]]) -> None:
    """Adds `msg` (and the messages it contains) to `schemas`: the JSON names the proto3 JSON
    parser accepts for each field (its json_name and its proto name)."""
    if msg.full_name in schemas:
        return
    fields: dict[str, Any] = {}
    names: dict[str, str] = {}
    repeated: dict[str, bool] = {}
    # names: each accepted spelling -> the field's proto name, the one identity two spellings
    # share; rep: the repeated fields (not maps), which a query string may give more than once.
    schemas[msg.full_name] = {"open": msg.full_name in OPEN_MESSAGES, "fields": fields, "names": names, "rep": repeated}
    for f in msg.fields:
        child = _child(f, schemas)
        for spelling in (f.json_name, f.name):
            fields[spelling] = child
            names[spelling] = f.name
        if f.is_repeated and not (f.message_type and f.message_type.GetOptions().map_entry):
            repeated[f.name] = True


def path_fields(template: str) -> list[str]:
    """The fields a path template binds (`/api/memory/{id}` binds `id`), as proto names."""
    return re.findall(r"\{([^}=]+)", template)


def tables(service_names: Iterable[str]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Every REST route, each with the schema its JSON body is parsed into (`schema`; False:
    the route takes no body, or a free-form one), the request message its query parameters
    name fields of (`input`), the fields its path binds (`vars`) and what its body fills
    (`body`: "*" the whole message, else one field's proto name, "" nothing); and the field
    table of every message reachable from those."""
    routes: list[dict[str, Any]] = []
    schemas: dict[str, dict[str, Any]] = {}
    for method in service_methods(service_names):
        _schema(method.input_type, schemas)
        for verb, template, body in _bindings(method):
            target: Any = False
            if body == "*":
                target = method.input_type.full_name
            elif body:
                target = _child(method.input_type.fields_by_name[body], schemas)
            routes.append(
                {
                    "method": verb,
                    "pattern": _lua_pattern(template),
                    "schema": target,
                    "input": method.input_type.full_name,
                    "vars": path_fields(template),
                    "body": body,
                }
            )
    # Literal paths before templated ones, so `/x/literal` is never read as `/x/{var}`.
    routes.sort(key=lambda r: ("[^/]+" in r["pattern"], r["pattern"], r["method"]))
    return routes, schemas


def _lua_value(value: Any) -> str:
    """Plain data as a Lua table constructor (JSON strings are valid Lua string literals for
    the ASCII names and patterns used here)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "{" + ",".join(_lua_value(v) for v in value) + "}"
    items = ",".join(f"[{json.dumps(k)}]={_lua_value(v)}" for k, v in sorted(value.items()))
    return "{" + items + "}"


def _lua_set(names: Iterable[str]) -> str:
    return "{" + ",".join(f"[{json.dumps(n)}]=true" for n in names) + "}"


def lua_source(service_names: Iterable[str], access: WebAccess) -> str:
    """The whole Lua filter: the generated tables followed by the fixed code."""
    routes, schemas = tables(service_names)
    hosts = "nil" if access.hosts is None else _lua_set(access.hosts)
    lines = [
        f"local MAX_URL = {MAX_URL_BYTES}",
        f"local MAX_DEPTH = {MAX_WALK_DEPTH}",
        f"local GUARD_HEADER = {json.dumps(GUARD_HEADER)}",
        "-- Host names accepted (any port); nil: any name. Origins accepted besides the request's own.",
        f"local HOSTS = {hosts}",
        f"local ORIGINS = {_lua_set(access.origins)}",
        "local ROUTES = {",
    ]
    lines += [f"  {_lua_value(r)}," for r in routes]
    lines += ["}", "local SCHEMAS = {"]
    lines += [f"  [{json.dumps(name)}] = {_lua_value(schemas[name])}," for name in sorted(schemas)]
    lines += ["}"]
    return "\n".join(lines) + "\n" + _LUA_CODE


def lua_filter(service_names: Iterable[str], access: WebAccess) -> dict[str, Any]:
    """The Envoy HTTP filter entry; it must come before the transcoder. Routes outside the
    REST contract on which it stays on (/mcp) get the Host and Origin check alone: no REST
    route matches them."""
    return {
        "name": "envoy.filters.http.lua",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua",
            "default_source_code": {"inline_string": lua_source(service_names, access)},
        },
    }


def buffer_filter(max_request_bytes: int) -> dict[str, Any]:
    """Buffers a whole request body (up to the transcoder's own limit) before the Lua check
    reads it; without it the check could read no more than Envoy's 1 MiB default buffer and
    a large recent-history save would be refused with 413."""
    return {
        "name": "envoy.filters.http.buffer",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
            "max_request_bytes": max_request_bytes,
        },
    }


# The fixed part of the filter. It walks the JSON text without building it: strings are
# skipped with string.find (C speed, so a 16 MiB save costs little), object keys are looked
# up in the message's field table, and the walk stops at the first unknown key or at the
# first byte that is not strict JSON.
_LUA_CODE = r"""
local WS = "[^ \t\r\n]"
local ESCAPES = {['"']='"', ['\\']='\\', ['/']='/', b='\b', f='\f', n='\n', r='\r', t='\t'}

local function utf8_char(n)
  if n < 0x80 then return string.char(n) end
  if n < 0x800 then return string.char(0xC0 + math.floor(n / 0x40), 0x80 + n % 0x40) end
  if n < 0x10000 then
    return string.char(0xE0 + math.floor(n / 0x1000), 0x80 + math.floor(n / 0x40) % 0x40, 0x80 + n % 0x40)
  end
  return string.char(0xF0 + math.floor(n / 0x40000), 0x80 + math.floor(n / 0x1000) % 0x40,
                     0x80 + math.floor(n / 0x40) % 0x40, 0x80 + n % 0x40)
end

-- The key as the transcoder's JSON parser reads it: escapes decoded, \uD83E\uDDE0 pairs
-- joined. A lone surrogate stays as written (it matches no field name either way). nil when
-- an escape is not one of JSON's (the transcoder would read `\K` as `K`).
local function decode_key(raw)
  local out, i = {}, 1
  while true do
    local k = raw:find("\\", i, true)
    if not k then out[#out + 1] = raw:sub(i); break end
    out[#out + 1] = raw:sub(i, k - 1)
    local c = raw:sub(k + 1, k + 1)
    local hex = raw:sub(k + 2, k + 5)
    if c == "u" then
      if not hex:match("^%x%x%x%x$") then return nil end
      local n, j = tonumber(hex, 16), k + 6
      local low = raw:match("^\\u(%x%x%x%x)", j)
      if n >= 0xD800 and n < 0xDC00 and low and tonumber(low, 16) >= 0xDC00 and tonumber(low, 16) < 0xE000 then
        n, j = 0x10000 + (n - 0xD800) * 0x400 + (tonumber(low, 16) - 0xDC00), j + 6
      end
      if n >= 0xD800 and n < 0xE000 then
        out[#out + 1] = raw:sub(k, k + 5)
      else
        out[#out + 1] = utf8_char(n)
      end
      i = j
    else
      if not ESCAPES[c] then return nil end
      out[#out + 1], i = ESCAPES[c], k + 2
    end
  end
  return table.concat(out)
end

-- Returns the index just past the string that opens at i (nil: it never closes), and, when
-- wanted, its decoded text (false: not a valid JSON key). The closing quote is found with a
-- plain search (memchr speed; a pattern class costs tens of nanoseconds a byte) and is
-- escaped when an odd number of backslashes precedes it.
local function skip_string(s, i, want)
  local j = i + 1
  while true do
    local k = s:find('"', j, true)
    if not k then return nil end
    local b = k - 1
    while s:byte(b) == 92 do b = b - 1 end
    if (k - 1 - b) % 2 == 0 then
      if want then
        local raw = s:sub(i + 1, k - 1)
        if raw:find("[%z\1-\31]") then return k + 1, false end
        if raw:find("\\", 1, true) then raw = decode_key(raw) or false end
        return k + 1, raw
      end
      return k + 1
    end
    j = k + 1
  end
end

-- Returns the index just past the number that starts at i, by JSON's grammar (no leading
-- zero, plus sign, bare dot, hex, NaN or Infinity), or nil.
local function skip_number(s, i)
  local j = i
  if s:byte(j) == 45 then j = j + 1 end
  local b = s:byte(j)
  if b == 48 then
    j = j + 1
  elseif b and b >= 49 and b <= 57 then
    j = s:find("[^0-9]", j + 1) or (#s + 1)
  else
    return nil
  end
  if s:byte(j) == 46 then
    local k = s:find("[^0-9]", j + 1) or (#s + 1)
    if k == j + 1 then return nil end
    j = k
  end
  b = s:byte(j)
  if b == 101 or b == 69 then
    j = j + 1
    b = s:byte(j)
    if b == 43 or b == 45 then j = j + 1 end
    local k = s:find("[^0-9]", j) or (#s + 1)
    if k == j then return nil end
    j = k
  end
  return j
end

local LITERALS = {[116] = "true", [102] = "false", [110] = "null"}

local function field_of(schema, key)
  -- schema: a message name, {map = child}, or false (free-form: nothing checked).
  if not schema then return false, true end
  if type(schema) == "table" then return schema.map, true end
  local msg = SCHEMAS[schema]
  local child = msg.fields[key]
  if child ~= nil then return child, true end
  return false, msg.open
end

-- Checks the JSON text s parsed as `root`. nil when it is strict JSON (RFC 8259) naming only
-- fields the messages have; else ("syntax", byte offset) where it stops being strict JSON, or
-- ("unknown", the field's path), or ("duplicate", its path, the spelling met first). Strict, because the transcoder's parser is lenient (form
-- feeds and vertical tabs as spaces, single-quoted strings, bare keys, trailing commas): a
-- walk that read such a body differently could miss a field the transcoder then drops.
-- Inside strings only the end matters, and in keys their text; values are the transcoder's.
-- Strict JSON also returns (nil, the top-level fields: proto name -> the spelling sent).
local function check_json(s, root)
  local tops = {}
  local i = s:find(WS)
  if not i then return nil, tops end -- blank: the empty message
  local stack, depth = {}, 0
  local want = root        -- the schema of the value that starts at i
  local state = "value"
  while true do
    if not i then
      if depth == 0 and state == "after" then return nil, tops end
      return "syntax", #s
    end
    local c = s:byte(i)
    if state == "value" then
      if c == 123 or c == 91 then
        depth = depth + 1
        if depth > MAX_DEPTH then return nil end -- the transcoder refuses it
        local prefix = (depth > 1 and stack[depth - 1].at) or ""
        stack[depth] = {obj = (c == 123), schema = want, path = prefix, at = prefix, seen = {}}
        local j = s:find(WS, i + 1)
        if not j then return "syntax", #s end
        local close = s:byte(j)
        if (c == 123 and close == 125) or (c == 91 and close == 93) then
          depth, i, state = depth - 1, s:find(WS, j + 1), "after"
        else
          i = j
          if c == 123 then state = "key" end
        end
      elseif c == 34 then
        local j = skip_string(s, i, false)
        if not j then return "syntax", i - 1 end
        i, state = s:find(WS, j), "after"
      elseif c == 45 or (c >= 48 and c <= 57) then
        local j = skip_number(s, i)
        if not j then return "syntax", i - 1 end
        i, state = s:find(WS, j), "after"
      else
        local lit = LITERALS[c]
        if not lit or s:sub(i, i + #lit - 1) ~= lit then return "syntax", i - 1 end
        i, state = s:find(WS, i + #lit), "after"
      end
    elseif state == "key" then
      if c ~= 34 then return "syntax", i - 1 end
      local start, key = i
      i, key = skip_string(s, i, true)
      if not i or not key then return "syntax", start - 1 end
      local top = stack[depth]
      local child, known = field_of(top.schema, key)
      local at = top.path == "" and key or (top.path .. "." .. key)
      if not known then return "unknown", at end
      -- A field once per object, in either spelling (a map or free-form key: once as written).
      local msg = type(top.schema) == "string" and SCHEMAS[top.schema]
      local id = msg and msg.names[key] or key
      if top.seen[id] then return "duplicate", at, top.seen[id] end
      top.seen[id] = key
      if depth == 1 then tops[id] = key end
      top.at = at
      i = s:find(WS, i)
      if not i or s:byte(i) ~= 58 then return "syntax", (i or #s + 1) - 1 end
      i, want, state = s:find(WS, i + 1), child, "value"
    else -- after a value
      if depth == 0 then return "syntax", i - 1 end -- something after the whole value
      local top = stack[depth]
      if c == 44 then
        i = s:find(WS, i + 1)
        if top.obj then state = "key" else want, state = top.schema, "value" end
      elseif (c == 125 and top.obj) or (c == 93 and not top.obj) then
        depth, i = depth - 1, s:find(WS, i + 1)
      else
        return "syntax", i - 1
      end
    end
  end
end

local function valid_utf8(s)
  local i, n = 1, #s
  while i <= n do
    local b = s:byte(i)
    local len = (b < 0x80 and 1) or (b >= 0xC2 and b < 0xE0 and 2) or (b >= 0xE0 and b < 0xF0 and 3)
      or (b >= 0xF0 and b < 0xF5 and 4) or nil
    if not len or i + len - 1 > n then return false end
    for j = i + 1, i + len - 1 do
      local cb = s:byte(j)
      if cb < 0x80 or cb > 0xBF then return false end
    end
    i = i + len
  end
  return true
end

-- A JSON string literal of s; the bytes of invalid UTF-8 become \u00XX.
local function json_string(s)
  local high = valid_utf8(s) and "" or "\128-\255"
  return '"' .. s:gsub('[%z\1-\31"\\' .. high .. ']', function(c)
    return string.format("\\u%04x", c:byte())
  end) .. '"'
end

local function refuse(handle, status, grpc_code, message, field, description)
  local body = '{"code":' .. grpc_code .. ',"message":' .. json_string(message:sub(1, 512))
  if field then
    -- The same details as memsvc's own validation errors.
    body = body .. ',"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo",'
      .. '"reason":"INVALID_ARGUMENT","domain":"memsvc","metadata":{}},'
      .. '{"@type":"type.googleapis.com/google.rpc.BadRequest",'
      .. '"fieldViolations":[{"field":' .. json_string(field:sub(1, 128)) .. ',"description":'
      .. json_string(description or "unknown field") .. '}]}]'
  end
  -- Marks the request, which the local-reply rewriting can see (unlike response headers).
  handle:headers():replace(GUARD_HEADER, "1")
  handle:respond({[":status"] = tostring(status), ["content-type"] = "application/json"}, body .. "}")
end

local function route_of(method, path)
  local bare = path:match("^[^?]*")
  for _, r in ipairs(ROUTES) do
    if r.method == method and bare:find(r.pattern) then return r end
  end
  return nil
end

local function unescape(text)
  return (text:gsub("%+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- The query parameters of a path, each as {name = the name sent (decoded), field = the proto
-- path of the field it sets in the message `input` (nil: none, the transcoder refuses it),
-- rep = whether that field is repeated}.
local function query_fields(path, input)
  local out = {}
  local query = path:match("%?(.*)$")
  if not query then return out end
  for part in query:gmatch("[^&]+") do
    local name = unescape(part:match("^[^=]*"))
    if name ~= "" then
      local msg, canon, rep = input, {}, false
      for seg in (name .. "."):gmatch("([^.]*)%.") do
        local schema = msg and SCHEMAS[msg]
        local proto = schema and schema.names[seg]
        if not proto then canon = nil; break end
        canon[#canon + 1], rep = proto, schema.rep[proto] or false
        local child = schema.fields[seg]
        msg = type(child) == "string" and child or nil
      end
      out[#out + 1] = {name = name, field = canon and table.concat(canon, "."), rep = rep}
    end
  end
  return out
end

-- Whether setting field a also sets (part of) field b, or the other way round.
local function overlaps(a, b)
  return a == b or a:sub(1, #b + 1) == b .. "." or b:sub(1, #a + 1) == a .. "."
end

-- Why a field has more than one source (the path, the query, the body, twice the query), or nil: the
-- transcoder would let the last one win, so `DELETE /api/memory/A?id=B` deleted B while the
-- access log showed A. Returns the message and the name as sent.
local function second_source(route, params, tops, has_body)
  local seen = {}
  for _, p in ipairs(params) do
    if p.field then
      -- Twice in the query (either spelling), unless the field is repeated (?ids=a&ids=b).
      if seen[p.field] and not p.rep then
        return p.name .. " is given twice in the query (first as " .. seen[p.field] .. ")", p.name
      end
      seen[p.field] = seen[p.field] or p.name
      for _, v in ipairs(route.vars) do
        if overlaps(p.field, v) then return p.name .. " is given in the path and again in the query", p.name end
      end
      -- (A body bound to one field is a Struct here, which the query cannot reach into.)
      if has_body and route.body == "*" and tops and tops[p.field:match("^[^.]*")] then
        return p.name .. " is given in the query and again in the body", p.name
      end
    end
  end
  if tops and route.body == "*" then
    for _, v in ipairs(route.vars) do
      local sent = tops[v:match("^[^.]*")]
      if sent then return sent .. " is given in the path and again in the body", sent end
    end
  end
  return nil
end

-- The name of a Host header (lowercase, without its port), or nil when it is not a plain
-- host[:port]: userinfo (127.0.0.1:1@evil.example), a path or an odd port are refused.
local function host_name(authority)
  local a = authority:lower()
  local name, rest = a:match("^(%[[%x:.]+%])(.*)$")
  if not name then name, rest = a:match("^([%w.-]+)(.*)$") end
  if not name or (rest ~= "" and not rest:match("^:%d%d?%d?%d?%d?$")) then return nil end
  return name
end

-- Why a request may not be served from where it comes (memsvc.kernel.web_access), or nil.
local function web_refusal(headers)
  local authority = headers:get(":authority") or ""
  local name = host_name(authority)
  if not name then
    return "the Host header must be a host name or address with an optional port"
  end
  if HOSTS and not HOSTS[name] then
    return "this server does not answer to the Host " .. name .. " (MEMSVC_ALLOWED_HOSTS lists more names)"
  end
  local origin = headers:get("origin")
  if origin then
    local o = origin:lower()
    if o ~= "http://" .. authority:lower() and o ~= "https://" .. authority:lower() and not ORIGINS[o] then
      return "requests from pages of another origin are refused: " .. origin:sub(1, 200)
        .. " (MEMSVC_ALLOWED_ORIGINS lists more origins)"
    end
  end
  return nil
end

-- Whether a content type is JSON's: application/json, parameters (charset) allowed.
local function is_json(ctype)
  local media = ctype:lower():match("^%s*([^;%s]*)")
  return media == "application/json"
end

function envoy_on_request(handle)
  local headers = handle:headers()
  headers:remove(GUARD_HEADER)
  local refusal = web_refusal(headers)
  if refusal then
    refuse(handle, 403, 7, refusal)
    return
  end
  local path = headers:get(":path") or ""
  if #path > MAX_URL then
    refuse(handle, 414, 8, "the URL is " .. #path .. " bytes long; at most " .. MAX_URL .. " are accepted")
    return
  end
  -- gRPC passes through untranscoded: the content type is exactly application/grpc or
  -- application/grpc+<codec> (the transcoder's own test), or gRPC-Web's
  -- (application/grpc-web[-text][+codec]), which the grpc_web filter turns into gRPC. Neither
  -- is a content type a page may send across origins without a preflight.
  local ctype = headers:get("content-type") or ""
  if ctype == "application/grpc" or ctype:find("^application/grpc%+") or ctype:find("^application/grpc%-web") then
    return
  end
  local method = headers:get(":method") or ""
  local route = route_of(method, path)
  if not route then return end
  local body = handle:body()
  local size = body and body:length() or 0
  -- A body, or a content type on anything but a read, must be declared JSON: a web page can
  -- send text/plain, a form or multipart across origins without a CORS preflight.
  if (size > 0 or (ctype ~= "" and method ~= "GET" and method ~= "HEAD")) and not is_json(ctype) then
    local got = ctype == "" and "no content type" or ("content-type " .. ctype:sub(1, 100))
    refuse(handle, 415, 3, "the request body must be JSON, sent with content-type: application/json (got " .. got .. ")")
    return
  end
  local tops = nil
  if size > 0 and route.schema then
    local problem, where, first = check_json(body:getBytes(0, size), route.schema)
    if problem == "syntax" then
      refuse(handle, 400, 3, "the request body is not strict JSON (RFC 8259) at byte " .. where
        .. ": only double-quoted keys and strings, true, false, null, plain decimal numbers, and spaces,"
        .. " tabs and line breaks between them")
      return
    elseif problem == "unknown" then
      refuse(handle, 400, 3, "unknown field in the request body: " .. where:sub(1, 128), where)
      return
    elseif problem == "duplicate" then
      refuse(handle, 400, 3, where:sub(1, 128) .. " is given twice in the request body (first as " .. first:sub(1, 128)
        .. "): give each field once", where, "given more than once")
      return
    end
    tops = where
  end
  local why, name = second_source(route, query_fields(path, route.input), tops, size > 0)
  if why then
    refuse(handle, 400, 3, why .. ": give each field once", name, "given more than once")
  end
end
"""
