"""Memory settings over gRPC: every field with its default, strict
all-or-nothing writes that list every violation, lenient normalization of whatever is stored,
the URL policy for customBaseUrl, "" → null, and a cache that never serves a stale value.
"""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, struct_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from memsvc.v1 import settings_pb2 as spb

C = grpc.StatusCode

DEFAULTS: dict[str, Any] = {
    "enabled": False,
    "maxTokens": 2000,
    "retentionDays": 30,
    "strategy": "hybrid",
    "scope": "apiKey",
    "skillsEnabled": False,
    "embeddingSource": "auto",
    "embeddingProviderModel": None,
    "customBaseUrl": None,
    "customModelId": None,
    "transformersEnabled": False,
    "staticEnabled": False,
    "rerankEnabled": False,
    "rerankProviderModel": None,
    "vectorStore": "auto",
    "primaryBackend": "local",
    "fallbackBackends": [],
    "backendConfigs": {},
    "dedupOnWrite": True,
}


# ---- helpers ---------------------------------------------------------------------------------


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


def as_api(msg: spb.MemorySettings) -> dict[str, Any]:
    """Every field under its JSON name; unset optional strings as None."""
    out: dict[str, Any] = {}
    for field in msg.DESCRIPTOR.fields:
        name = field.json_name
        if field.has_presence and field.message_type is None:
            out[name] = getattr(msg, field.name) if msg.HasField(field.name) else None
        elif field.message_type is not None and field.message_type.full_name == "google.protobuf.Struct":
            out[name] = json_format.MessageToDict(getattr(msg, field.name))
        elif field.is_repeated:
            out[name] = list(getattr(msg, field.name))
        else:
            out[name] = getattr(msg, field.name)
    return out


def get(stubs) -> dict[str, Any]:
    return as_api(stubs.settings.GetMemorySettings(spb.GetMemorySettingsRequest()))


def put(stubs, **values: Any) -> dict[str, Any]:
    return as_api(stubs.settings.UpdateMemorySettings(spb.UpdateMemorySettingsRequest(settings=struct(values))))


def put_error(stubs, values: dict[str, Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        stubs.settings.UpdateMemorySettings(spb.UpdateMemorySettingsRequest(settings=struct(values)))
    return info.value


def violations(err: grpc.RpcError) -> dict[str, str]:
    status = rpc_status.from_call(err)
    found: dict[str, str] = {}
    for any_ in status.details if status else []:
        if any_.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            br = error_details_pb2.BadRequest()
            any_.Unpack(br)
            found.update({v.field: v.description for v in br.field_violations})
    return found


def write_raw(server, rows: dict[str, str]) -> None:
    """Store raw JSON text under memory.<name> the way another process (or a hand edit) would,
    bumping the settings version as every writer does."""
    with server.app.database.write() as conn:
        for name, value in rows.items():
            conn.execute(
                "INSERT INTO settings (key, value, updated_at) VALUES (?, ?, NULL) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (f"memory.{name}", value),
            )
        conn.execute(
            "INSERT INTO sequences (name, value) VALUES ('settings_version', 1) "
            "ON CONFLICT(name) DO UPDATE SET value = value + 1"
        )


def stored_rows(server) -> dict[str, str]:
    with server.app.database.read() as conn:
        return dict(conn.execute("SELECT key, value FROM settings WHERE key LIKE 'memory.%'").fetchall())


# ---- GET -------------------------------------------------------------------------------------


def test_get_returns_every_field_with_its_default(stubs):
    assert get(stubs) == DEFAULTS


def test_put_returns_every_field_normalized(stubs):
    got = put(stubs, enabled=True, maxTokens=1500, strategy="recent", scope="session", customModelId="  m1  ")
    assert set(got) == set(DEFAULTS)
    assert got == {
        **DEFAULTS,
        "enabled": True,
        "maxTokens": 1500,
        "strategy": "recent",
        "scope": "session",
        "customModelId": "m1",
    }
    assert get(stubs) == got


def test_every_writable_field_round_trips(stubs):
    values = {
        "enabled": True,
        "maxTokens": 16000,
        "retentionDays": 365,
        "strategy": "semantic",
        "scope": "global",
        "skillsEnabled": True,
        "embeddingSource": "static",
        "embeddingProviderModel": "openai/text-embedding-3-small",
        "customBaseUrl": "https://embeddings.example.com/v1",
        "customModelId": "my-model",
        "transformersEnabled": True,
        "staticEnabled": True,
        "rerankEnabled": True,
        "rerankProviderModel": "cohere/rerank-v3",
        "vectorStore": "local",
        "primaryBackend": "local",
        "fallbackBackends": ["local"],
        "backendConfigs": {"local": {"path": "x", "n": 2}},
        "dedupOnWrite": False,
    }
    assert set(values) == set(DEFAULTS)
    assert put(stubs, **values) == values
    assert get(stubs) == values


# ---- strict writes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field,value",
    [
        ("maxTokens", 20001),
        ("maxTokens", -1),
        ("maxTokens", 1.5),
        ("maxTokens", "2000"),
        ("maxTokens", True),
        ("retentionDays", -1),
        ("retentionDays", 366),
        ("enabled", "yes"),
        ("enabled", 1),
        ("enabled", None),
        ("strategy", "x"),
        ("strategy", "exact"),
        ("scope", "tenant"),
        ("embeddingSource", "cloud"),
        ("vectorStore", "pinecone"),
        ("primaryBackend", "redis"),
        ("fallbackBackends", ["redis"]),
        ("fallbackBackends", "sqlite"),
        ("backendConfigs", []),
        ("embeddingProviderModel", "no-slash"),
        ("customModelId", 5),
        ("bogus", 1),
    ],
)
def test_a_bad_field_is_invalid_argument_and_nothing_is_saved(server, stubs, field, value):
    before = get(stubs)
    err = put_error(
        stubs, {field: value, "retentionDays": 7} if field != "retentionDays" else {field: value, "maxTokens": 7}
    )
    assert err.code() is C.INVALID_ARGUMENT
    assert field in violations(err), violations(err)
    assert len(violations(err)) == 1, "the valid field beside it is not a violation"
    assert get(stubs) == before
    assert stored_rows(server) == {}


def test_max_tokens_over_the_limit(server, stubs):
    err = put_error(stubs, {"maxTokens": 20001})
    assert err.code() is C.INVALID_ARGUMENT
    assert "16000" in violations(err)["maxTokens"]
    assert get(stubs)["maxTokens"] == 2000


def test_several_bad_fields_are_all_listed_and_nothing_is_saved(server, stubs):
    put(stubs, maxTokens=1234)
    before, rows = get(stubs), stored_rows(server)
    err = put_error(stubs, {"maxTokens": 20001, "enabled": "yes", "bogus": 1, "strategy": "x", "retentionDays": 9})
    assert err.code() is C.INVALID_ARGUMENT
    assert set(violations(err)) == {"maxTokens", "enabled", "bogus", "strategy"}
    assert get(stubs) == before and before["maxTokens"] == 1234 and before["retentionDays"] == 30
    assert stored_rows(server) == rows


def test_empty_update_is_invalid_argument(stubs):
    assert put_error(stubs, {}).code() is C.INVALID_ARGUMENT


# ---- normalization on read -------------------------------------------------------------------


def test_stored_junk_is_normalized_on_read(server, stubs):
    assert get(stubs) == DEFAULTS  # cached now
    write_raw(server, {"enabled": '"yes"', "maxTokens": "20001", "retentionDays": "-3"})
    got = get(stubs)
    assert (got["enabled"], got["maxTokens"], got["retentionDays"]) == (True, 16000, 0)


@pytest.mark.parametrize(
    "name,raw,expected",
    [
        ("maxTokens", "-5", 0),
        ("maxTokens", "1500.6", 1501),
        ("maxTokens", '"300"', 300),
        ("maxTokens", '"x"', 2000),
        ("retentionDays", "400", 365),
        ("retentionDays", "12.4", 12),
        ("enabled", "1", True),
        ("enabled", '"off"', False),
        ("enabled", "[]", False),
        ("strategy", '"bogus"', "hybrid"),
        ("strategy", '"exact"', "recent"),
        ("scope", '"nope"', "apiKey"),
        ("embeddingSource", "3", "auto"),
        ("vectorStore", '"QDRANT!"', "auto"),
        ("customBaseUrl", '""', None),
        ("customModelId", '"   "', None),
        ("customModelId", "7", None),
        ("fallbackBackends", '["sqlite", "nope", 3]', ["local"]),
        ("fallbackBackends", '["sqlite", "local"]', ["local"]),
        ("primaryBackend", '"sqlite"', "local"),
        ("vectorStore", '"sqlite-vec"', "local"),
        ("vectorStore", '"pgvector"', "local"),
        ("backendConfigs", '"str"', {}),
    ],
)
def test_each_kind_of_junk_normalizes(server, stubs, name, raw, expected):
    write_raw(server, {name: raw})
    assert get(stubs)[name] == expected


def test_unparsable_row_falls_back_to_default(server, stubs):
    with server.app.database.write() as conn:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        conn.execute("INSERT INTO settings (key, value) VALUES ('memory.maxTokens', 'not json')")
        conn.execute("UPDATE sequences SET value = value + 1 WHERE name = 'settings_version'")
        conn.execute("PRAGMA ignore_check_constraints = OFF")
    assert get(stubs)["maxTokens"] == 2000


# ---- customBaseUrl URL policy ----------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "https://user:pass@example.com/v1",
        "https://alice:S3cr3tZ@example.com/v1",
        "https://example.com/v1?api_key=S3cr3tZ",
        "file:///etc/passwd",
        "http://169.254.169.254/",
        "http://169.254.169.254/latest/meta-data/",
        "http://metadata.google.internal/computeMetadata/v1",
        "http://[fd00:ec2::254]/",
        "ftp://example.com/",
        "https://",
        "not a url",
    ],
)
def test_custom_base_url_policy(server, stubs, url):
    err = put_error(stubs, {"customBaseUrl": url})
    assert err.code() is C.INVALID_ARGUMENT
    assert "customBaseUrl" in violations(err)
    shown = err.details() + json.dumps(violations(err))
    assert "S3cr3tZ" not in shown and "alice" not in shown and url not in shown, "errors never echo the URL"
    assert get(stubs)["customBaseUrl"] is None


@pytest.mark.parametrize("url", ["https://api.example.com/v1", "http://localhost:8080", "http://10.0.0.5:9000/emb"])
def test_acceptable_custom_base_url(stubs, url):
    assert put(stubs, customBaseUrl=url)["customBaseUrl"] == url
    assert get(stubs)["customBaseUrl"] == url


@pytest.mark.parametrize(
    "field,value",
    [
        ("customBaseUrl", "https://api.example.com/v1"),
        ("customModelId", "m1"),
        ("embeddingProviderModel", "openai/text-embedding-3-small"),
        ("rerankProviderModel", "cohere/rerank-v3"),
    ],
)
def test_empty_string_sets_a_nullable_string_back_to_null(stubs, field, value):
    assert put(stubs, **{field: value})[field] == value
    assert put(stubs, **{field: ""})[field] is None
    assert get(stubs)[field] is None
    assert put(stubs, **{field: value})[field] == value
    assert put(stubs, **{field: None})[field] is None


# ---- cache -----------------------------------------------------------------------------------


def test_a_write_invalidates_the_cache(server, stubs):
    for value in (1234, 99, 16000, 0):
        assert get(stubs)["maxTokens"] != value
        put(stubs, maxTokens=value)
        assert get(stubs)["maxTokens"] == value
    assert server.app.settings.get().max_tokens == 0


def test_another_writers_change_is_seen(server, stubs):
    assert get(stubs)["strategy"] == "hybrid"
    write_raw(server, {"strategy": '"semantic"'})
    assert get(stubs)["strategy"] == "semantic"


def test_settings_take_effect_on_the_engine(server, stubs):
    """Settings are not only stored: enabling memory changes what Retrieve does."""
    from memsvc.v1 import engine_pb2 as epb
    from memsvc.v1 import memory_pb2 as mpb

    stubs.memory.CreateMemory(mpb.CreateMemoryRequest(api_key_id="k", content="settings effect probe"))
    query = epb.RetrieveRequest(api_key_id="k", query="probe")
    assert len(stubs.engine.Retrieve(query).memories) == 0
    put(stubs, enabled=True)
    assert len(stubs.engine.Retrieve(query).memories) == 1
    put(stubs, maxTokens=1)
    assert len(stubs.engine.Retrieve(query).memories) == 0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_non_finite_number_is_invalid_argument(server, stubs, bad):
    """Only gRPC can send NaN/±Infinity in a Struct. Found failing with INTERNAL (json_format
    refuses to convert it); it is a wrong value like any other."""
    settings = struct({"maxTokens": 1})
    settings.fields["maxTokens"].number_value = bad
    with pytest.raises(grpc.RpcError) as info:
        stubs.settings.UpdateMemorySettings(spb.UpdateMemorySettingsRequest(settings=settings))
    assert info.value.code() is C.INVALID_ARGUMENT
    assert "maxTokens" in violations(info.value)
    assert get(stubs) == DEFAULTS


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_non_finite_number_inside_backend_configs_is_invalid_argument(server, stubs, bad):
    configs = struct({"backendConfigs": {"sqlite": {"n": 1}}})
    configs.fields["backendConfigs"].struct_value.fields["sqlite"].struct_value.fields["n"].number_value = bad
    with pytest.raises(grpc.RpcError) as info:
        stubs.settings.UpdateMemorySettings(spb.UpdateMemorySettingsRequest(settings=configs))
    assert info.value.code() is C.INVALID_ARGUMENT
    assert "backendConfigs" in violations(info.value)
    assert get(stubs) == DEFAULTS
