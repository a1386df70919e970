"""The committed OpenAPI document (deploy/openapi.json) against the real Envoy in front of a real
memsvc (a token required, memory on, the small static embedding model, a legacy root).

- A walk through every operation with requests that succeed (and a few that fail on
  purpose), each answer checked by schemathesis against the document: the status is
  documented, the content type too, and the body matches the schema of that status. Random
  requests rarely get past memsvc's validation, so this is what checks the success bodies.
- schemathesis's own run (its Python API, one pytest test per operation): generated
  requests, valid and invalid by the document, a bounded number per operation with a fixed
  seed and deterministic generation. No answer may be a 5xx, every one must conform to the
  document, and an operation that needs a token must refuse a call without one
  (`ignored_auth`).
- What schemathesis found, as plain regression tests, and the document as the gateway serves it.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from conftest import Rest, ServerHandle, make_config, start_gateway, start_server
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    response_schema_conformance,
    status_code_conformance,
)
from support.vectors import static_model  # noqa: F401 - a fixture

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = json.loads((ROOT / "deploy" / "openapi.json").read_text())
TOKEN = "openapi-admin-token"
# Generated requests per operation in each of schemathesis's generation modes (valid and
# invalid by the document), besides its coverage phase's own cases: about a minute for the
# whole run on two cores. Fixed seed, deterministic generation, no example database: the
# same requests on every run.
EXAMPLES = 100
CONFIG = schemathesis.Config.from_dict(
    {
        "seed": 20261204,
        "generation": {
            "max-examples": EXAMPLES,
            "deterministic": True,
            "database": "none",
            "mode": "all",
            "with-security-parameters": False,
        },
        "phases": {"stateful": {"enabled": False}},
        "auth": {"openapi": {"bearerAuth": {"bearer": TOKEN}}, "auto-signup": False},
        "request-timeout": 60,
    }
)
SCHEMA = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG)
CONFORMANCE = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@dataclass
class Stack:
    server: ServerHandle
    base: str
    legacy: Path
    answered: dict[str, set[int]] = field(default_factory=dict)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, static_model: Path) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("openapi")
    legacy_app = root / "old-app"
    (legacy_app / "memory" / "Relic").mkdir(parents=True)
    (legacy_app / "memory" / "Relic" / "recent.json").write_bytes(b"[]")
    config = make_config(root, api_tokens=(TOKEN,), static_model=str(static_model), legacy_app_roots=(str(legacy_app),))
    handle = start_server(config)
    try:
        gateway = start_gateway(handle)
    except BaseException:
        handle.stop()
        raise
    try:
        yield Stack(handle, f"http://127.0.0.1:{gateway.settings.listen_port}", legacy_app / "memory")
    finally:
        gateway.stop()
        handle.stop()


def test_the_gateway_serves_the_committed_document_without_a_token(stack: Stack) -> None:
    committed = (ROOT / "deploy" / "openapi.json").read_bytes()
    with urllib.request.urlopen(stack.base + "/api/openapi.json", timeout=30) as response:
        assert response.status == 200
        assert response.headers["content-type"] == "application/json"
        assert response.read() == committed
    # Only GET and HEAD: another method is the transcoder's, and no RPC has this path.
    status, body = Rest(stack.base).call("POST", "/api/openapi.json", {})
    assert status == 404 and body["code"] == 5, body


def call(stack: Stack, operation_id: str, status: int | None = 200, token: str | None = TOKEN, **request: Any) -> Any:
    """One request of the operation (with `token`), its answer validated against the document
    (and its status `status`, unless None); returns the body."""
    headers = {"authorization": f"Bearer {token}"} if token else None
    case = SCHEMA.find_operation_by_id(operation_id).Case(headers=headers, **request)
    response = case.call_and_validate(base_url=stack.base, checks=CONFORMANCE)
    assert status is None or response.status_code == status, (operation_id, response.status_code, response.text)
    stack.answered.setdefault(operation_id, set()).add(response.status_code)
    return response.json()


def _memories(stack: Stack) -> dict[str, str]:
    """Memory operations; returns the ids it made."""
    call(stack, "SettingsService_UpdateMemorySettings", body={"enabled": True})
    created = call(
        stack,
        "MemoryService_CreateMemory",
        body={
            "apiKeyId": "alice",
            "sessionId": "s1",
            "key": "preference:tea",
            "content": "I like oolong tea",
            "metadata": {"source": "chat", "tags": ["drinks"], "score": 1.5, "nested": {"ok": True}},
            "expiresAt": "2999-01-01T00:00:00Z",
            "occurredAt": "2024-05-01T12:30:00.250Z",
        },
    )
    batch = call(
        stack,
        "MemoryService_CreateMemories",
        body={
            "memories": [
                {"apiKeyId": "alice", "content": "We met in Lisbon in 2019"},
                {"apiKeyId": "alice", "type": "gossip", "content": "refused alone"},
            ]
        },
    )
    assert [r["success"] for r in batch["results"]] == [True, False], batch
    call(stack, "MemoryService_GetMemory", path_parameters={"id": created["id"]})
    call(stack, "MemoryService_ListMemories", query={"apiKeyId": "alice", "limit": 10})
    call(stack, "MemoryService_UpdateMemory", path_parameters={"id": created["id"]}, body={"keep": True})
    call(stack, "MemoryService_GetMemory", 404, path_parameters={"id": "no-such-memory"})
    call(stack, "MemoryService_CreateMemory", 400, body={"apiKeyId": "alice", "content": "x", "limit": 3})
    call(stack, "MemoryService_CheckHealth")
    history = call(stack, "MemoryService_GetMemoryHistory", path_parameters={"id": created["id"]}, query={"limit": 5})
    assert history["entries"][0]["event"] == "created" and history["apiKeyId"] == "alice", history
    call(stack, "MemoryService_GetMemoryHistory", 400, path_parameters={"id": created["id"]}, query={"limit": 0})
    events = call(stack, "MemoryService_WatchMemories", query={"apiKeyId": "alice", "stopWhenCaughtUp": True})
    assert events[0]["kind"] == "bookmark", events
    doomed = call(stack, "MemoryService_CreateMemory", body={"apiKeyId": "bob", "content": "short-lived"})
    call(stack, "MemoryService_DeleteMemory", path_parameters={"id": doomed["id"]})
    call(stack, "MemoryService_ClearMemories", query={"apiKeyId": "bob", "olderThan": "2999-01-01T00:00:00Z"})
    return {"tea": created["id"]}


def _engine(stack: Stack) -> None:
    call(stack, "SettingsService_UpdateMemorySettings", body={"embeddingSource": "static", "staticEnabled": True})
    stack.server.app.vectors.embeddings.warm(stack.server.app.settings.get())
    progress = call(stack, "EngineService_Reindex", body={"force": True})
    assert progress[-1]["state"] == "done", progress
    found = call(stack, "EngineService_Retrieve", body={"apiKeyId": "alice", "query": "which tea do I like?"})
    assert found["memories"], found
    call(stack, "EngineService_RetrievePreview", body={"apiKeyId": "alice", "query": "tea"})
    chat = {"messages": [{"role": "user", "content": "What tea should I brew?"}]}
    call(stack, "EngineService_Inject", body={"apiKeyId": "alice", "provider": "openai", "request": chat})
    call(stack, "EngineService_Extract", body={"apiKeyId": "alice", "text": "I prefer green tea", "wait": True})
    call(stack, "EngineService_Summarize", body={"apiKeyId": "alice", "dryRun": True, "olderThanDays": 1})
    call(stack, "EngineService_ListEmbeddingProviders")
    call(stack, "EngineService_GetEngineStatus")


def _settings(stack: Stack) -> None:
    call(stack, "SettingsService_GetMemorySettings")
    call(stack, "SettingsService_GetQdrantSettings")
    qdrant = str(stack.server.config.data_dir / "qdrant")
    call(stack, "SettingsService_UpdateQdrantSettings", body={"enabled": True, "localPath": qdrant})
    call(stack, "SettingsService_CheckQdrantHealth")
    progress = call(stack, "EngineService_Reindex", body={"target": "qdrant"})
    assert progress[-1]["state"] == "done", progress
    call(stack, "SettingsService_SearchQdrant", body={"query": "tea", "apiKeyId": "alice"})
    call(stack, "SettingsService_CleanupQdrant", body={})
    call(stack, "SettingsService_ListQdrantEmbeddingModels")
    for toggle in ("ReviewConfig", "PowerfulMemoryConfig"):
        call(stack, f"SettingsService_Set{toggle}", body={"enabled": False})
        call(stack, f"SettingsService_Get{toggle}")
        call(stack, f"SettingsService_Set{toggle}", body={"enabled": True})
        call(stack, f"SettingsService_Set{toggle}", 400, body={"enabled": "yes"})


def _characters(stack: Stack) -> None:
    messages = [{"role": "user", "text": "hello Mia"}, {"role": "assistant", "text": "hi!", "extra": 1}]
    call(stack, "MemoryService_AppendRecentMessages", body={"character": "Mia", "messages": messages})
    call(stack, "MemoryService_ListRecentFiles")
    snap = call(stack, "MemoryService_GetRecentFile", query={"filename": "recent_Mia.json"})
    save = {"filename": "recent_Mia.json", "chat": [{"role": "user", "text": "hello again"}]}
    save |= {"fingerprint": snap["fingerprint"], "identity_token": snap["identity_token"]}
    call(stack, "MemoryService_SaveRecentFile", body=save)
    call(stack, "MemoryService_SaveRecentFile", 409, body=save)  # the snapshot is stale now
    call(stack, "MemoryService_RenameCharacter2", path_parameters={"old_name": "Mia"}, body={"new_name": "Nia"})
    call(stack, "MemoryService_RenameCharacter", body={"old_name": "Mia", "new_name": "Nia"})  # done already
    scan = call(stack, "MemoryService_ScanLegacy")
    paths = [entry["path"] for root in scan["legacy_roots"] for entry in root["entries"]]
    assert paths == [str(stack.legacy / "Relic")], scan
    call(stack, "MemoryService_PurgeLegacy", body={"paths": [*paths, "relative/x", 5]})


def _credentials(stack: Stack) -> None:
    body = {"id": "agent-a", "permissions": ["read:memory"], "tenants": ["alice"]}
    created = call(stack, "CredentialService_CreateCredential", body=body)
    call(stack, "CredentialService_CreateCredential", 409, body=body)
    call(stack, "CredentialService_ListCredentials")
    call(stack, "CredentialService_GetCaller")
    call(stack, "CredentialService_GetCaller", token=None)
    call(stack, "MemoryService_ListMemories", 403, token=created["token"], query={"apiKeyId": "bob"})
    call(stack, "CredentialService_RevokeCredential", path_parameters={"id": "agent-a"})
    call(stack, "MemoryService_CheckHealth", 401, token=None)
    call(stack, "MemoryService_ListMemories", 401, token=created["token"], query={"apiKeyId": "alice"})


# Qdrant's local mode (the reindex to Qdrant below) says payload indexes do nothing there.
@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
def test_every_operation_answers_as_documented(stack: Stack) -> None:
    """Each operation's success body, and the error bodies of 400, 401, 403, 404 and 409,
    match the document; every operation of the document answered 200 at least once."""
    _memories(stack)
    _engine(stack)
    _settings(stack)
    _characters(stack)
    _credentials(stack)
    operations = {op["operationId"] for item in DOCUMENT["paths"].values() for op in item.values()}
    assert set(stack.answered) == operations
    assert [op for op, statuses in sorted(stack.answered.items()) if 200 not in statuses] == []
    assert set().union(*stack.answered.values()) == {200, 400, 401, 403, 404, 409}


def test_a_query_the_model_embeds_as_zeros_is_no_server_error(stack: Stack) -> None:
    """Found by schemathesis: a test search whose query has no token the static model knows
    (its embedding is all zeros) was answered 503 UNAVAILABLE, as if Qdrant were down."""
    call(stack, "SettingsService_UpdateMemorySettings", body={"enabled": True, "embeddingSource": "static"})
    call(stack, "SettingsService_UpdateMemorySettings", body={"staticEnabled": True})
    stack.server.app.vectors.embeddings.warm(stack.server.app.settings.get())
    qdrant = str(stack.server.config.data_dir / "qdrant")
    call(stack, "SettingsService_UpdateQdrantSettings", body={"enabled": True, "localPath": qdrant})
    call(stack, "SettingsService_SearchQdrant", None, body={"query": "\u008c"})


@pytest.mark.parametrize("name", ["a~b", "x|y", "100%", "s-os.~"])
def test_a_header_name_grpc_cannot_carry_is_no_server_error(stack: Stack, name: str) -> None:
    """Found by schemathesis: a request header whose name has a character gRPC metadata keys
    may not have (legal in HTTP) failed every call with 500 INTERNAL "Illegal header key"."""
    status, body = Rest(stack.base, token=TOKEN).call("GET", "/api/memory/health", headers={name: "x"})
    assert status == 200, body


@SCHEMA.parametrize()
def test_schemathesis_finds_nothing(case: schemathesis.Case, stack: Stack) -> None:
    """A request whose path is invalid on purpose (an empty or literal segment) reaches
    another route or none: its answer is held to no operation's schema, only to no 5xx and
    a JSON error or body. WatchMemories is a stream that goes on until its follower leaves:
    every generated request that reaches it (GetMemory's `/api/memory/{id}` with the id
    "watch" does too: a literal segment wins) asks it to end once caught up, or the call
    would only end at the request timeout."""
    if case.formatted_path.rstrip("/") == "/api/memory/watch":
        case.query = {**(case.query or {}), "stopWhenCaughtUp": "true"}
    if case.meta is not None and case.meta.is_negative_at(ParameterLocation.PATH):
        case.call_and_validate(base_url=stack.base, checks=[not_a_server_error, content_type_conformance])
        return
    case.call_and_validate(base_url=stack.base, checks=[*CONFORMANCE, ignored_auth])
