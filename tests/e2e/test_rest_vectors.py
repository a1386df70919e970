"""Embeddings, vector tiers, Reindex and Qdrant over REST through the real Envoy gateway:
the streamed Reindex arrives as one JSON array, refusals are real HTTP statuses
(400 NO_EMBEDDING_SOURCE, 409 REINDEX_RUNNING) before any message, the URL policy and the
Qdrant settings validation are 400s, the Qdrant API key comes back only masked, and engine
status / providers / preview speak camelCase with every number printed.

One server and one Envoy for the module (they take seconds to start); each test sets the
settings it needs and uses its own apiKeyId.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from conftest import Rest, make_config, start_gateway, start_server

from memsvc.v1 import engine_pb2 as epb
from tests.support.vectors import (
    MINILM_DIM,
    LoopbackModels,
    model_server,
    models,  # noqa: F401 - fixture
    remote_settings,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore:Local mode performs exact:UserWarning"),
    pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning"),
]

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
EDITOR = "I prefer dark mode in my editor"
PROVIDER_KEY = "sk-rest-provider-key-77aa"
QDRANT_KEY = "qd-rest-secret-key-9012"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    models = model_server()
    handle = start_server(
        make_config(
            tmp_path_factory.mktemp("rest-vectors"),
            embedding_providers=(("local", models.base_url),),
            embedding_api_keys=(("local", PROVIDER_KEY),),
        )
    )
    gateway = start_gateway(handle)
    yield handle, Rest(f"http://127.0.0.1:{gateway.settings.listen_port}")
    gateway.stop()
    handle.stop()


@pytest.fixture
def rest(env, models) -> Rest:
    handle, client = env
    return client


def ok(rest: Rest, method: str, path: str, body: Any = None) -> Any:
    status, payload = rest.call(method, path, body)
    assert status == 200, (status, payload)
    return payload


def reason(body: Any) -> str | None:
    for detail in body.get("details", []):
        if detail.get("@type") == ERROR_INFO:
            return detail.get("reason")
    return None


def violations(body: Any) -> set[str]:
    found: set[str] = set()
    for detail in body.get("details", []):
        if detail.get("@type") == BAD_REQUEST:
            found.update(v["field"] for v in detail["fieldViolations"])
    return found


def no_source(rest: Rest) -> None:
    ok(
        rest,
        "PUT",
        "/api/settings/memory",
        {
            "enabled": True,
            "embeddingSource": "auto",
            "customBaseUrl": "",
            "customModelId": "",
            "transformersEnabled": False,
            "staticEnabled": False,
            "rerankEnabled": False,
        },
    )


def use_remote(rest: Rest, models: LoopbackModels) -> None:
    ok(rest, "PUT", "/api/settings/memory", remote_settings(models))


def create(rest: Rest, owner: str, content: str) -> str:
    return ok(rest, "POST", "/api/memory", {"apiKeyId": owner, "content": content})["id"]


# ---- Reindex ---------------------------------------------------------------------------------


def test_reindex_without_a_source_is_400_no_embedding_source(rest):
    no_source(rest)
    create(rest, "key-rest-nosrc", "a memory without a vector")
    status, body = rest.call("POST", "/api/memory/reindex", {})
    assert status == 400, body
    assert isinstance(body, dict) and body["code"] == 9  # FAILED_PRECONDITION, before any message
    assert reason(body) == "NO_EMBEDDING_SOURCE"


def test_reindex_streams_as_one_json_array(rest, models):
    use_remote(rest, models)
    for text in (EDITOR, "My cat is called Miso", "I usually run in the morning"):
        create(rest, "key-rest-reindex", text)
    vectors = ok(rest, "GET", "/api/memory/engine-status")["vectorStore"]
    pending = vectors["rowCount"] + vectors["needsReindex"]  # force: every memory
    messages = ok(rest, "POST", "/api/memory/reindex", {"force": True})
    assert isinstance(messages, list) and len(messages) >= 2
    first, last = messages[0], messages[-1]
    assert first["started"] is True and first["pending"] == pending >= 3
    assert first["processed"] == 0 and first["errors"] == 0  # primitives printed
    assert last["state"] == "done" and last["pending"] == 0 and last["processed"] == pending
    processed = [m["processed"] for m in messages]
    assert processed == sorted(processed)
    status = ok(rest, "GET", "/api/memory/engine-status")
    assert status["vectorStore"]["needsReindex"] == 0 and status["vectorStore"]["rowCount"] == pending


def test_a_second_reindex_is_409_and_attach_returns_the_running_job(env, rest, models):
    handle, _ = env
    no_source(rest)  # written without a vector (and not in the embedding cache)
    create(rest, "key-rest-409", "a memory to embed slowly")
    use_remote(rest, models)
    models.mode = "slow"
    models.delay_s = 30.0  # released by reset() below
    stubs = handle.stubs()
    running = stubs.engine.Reindex(epb.ReindexRequest(), timeout=60)
    opening = next(running)
    assert opening.started and opening.pending >= 1
    status, body = rest.call("POST", "/api/memory/reindex", {})
    assert status == 409, body
    assert body["code"] == 10 and reason(body) == "REINDEX_RUNNING"
    release = threading.Timer(0.5, models.reset)
    release.start()
    try:
        attached = ok(rest, "POST", "/api/memory/reindex", {"attach": True})
    finally:
        release.join()
    assert attached[0]["started"] is True and attached[0]["pending"] == opening.pending
    assert attached[-1]["state"] == "done" and attached[-1]["processed"] == opening.pending
    assert list(running)[-1].state == "done"


# ---- status, providers, preview --------------------------------------------------------------


def test_engine_status_providers_and_preview_in_camel_case(rest, models):
    use_remote(rest, models)
    editor = create(rest, "key-rest-preview", EDITOR)
    for text in ("I will use PostgreSQL for this project", "My cat is called Miso"):
        create(rest, "key-rest-preview", text)
    status = ok(rest, "GET", "/api/memory/engine-status")
    emb, vec = status["embedding"], status["vectorStore"]
    assert emb["source"] == "remote" and emb["dimensions"] == MINILM_DIM and emb["available"] is True
    assert emb["signature"] == "remote:minilm:384" and vec["signature"] == "remote:minilm:384"
    assert set(emb["cacheStats"]) == {"hits", "misses", "size"}
    assert vec["backend"] == "sqlite-vec" and vec["available"] is True and vec["rowCount"] >= 3
    assert status["qdrant"]["enabled"] is False and status["keyword"]["backend"] == "FTS5"
    assert "needsReindex" in vec and "latencyMs" in status["qdrant"]
    assert status["retrieval"] == {"fusion": "gated-convex", "rrfK": 60, "listTopK": 20}

    providers = ok(rest, "GET", "/api/memory/embedding-providers")["providers"]
    local = next(p for p in providers if p["provider"] == "local")
    assert local["hasKey"] is True and local["kind"] == "remote"
    assert any(p["provider"] == "transformers" and p["models"][0]["dimensions"] == 384 for p in providers)
    assert PROVIDER_KEY not in str(providers) and PROVIDER_KEY not in str(status)

    preview = ok(
        rest,
        "POST",
        "/api/memory/retrieve-preview",
        {"query": "What editor theme do I like?", "apiKeyId": "key-rest-preview", "strategy": "semantic"},
    )
    top = preview["memories"][0]
    assert top["id"] == editor and top["tier"] == "vector" and "vecScore" in top and "ftsScore" not in top
    res = preview["resolution"]
    assert res["embeddingSource"] == "remote" and res["vectorStore"] == "sqlite-vec"
    assert res["strategyUsed"] == "vector" and res["fallbackReason"] == "" and res["rerankApplied"] is False
    assert preview["totalTokensUsed"] == sum(m["tokens"] for m in preview["memories"])


# ---- Qdrant settings ---------------------------------------------------------------------------


def test_qdrant_settings_over_rest(rest, models):
    use_remote(rest, models)
    for patch, field in (
        ({"port": 65536}, "port"),
        ({"collection": ""}, "collection"),
        ({"enabled": True, "localPath": "/anywhere/qdrant"}, "localPath"),
        ({"enabled": True, "localPath": "~/qdrant"}, "localPath"),
    ):
        before = ok(rest, "GET", "/api/settings/qdrant")
        status, body = rest.call("PUT", "/api/settings/qdrant", patch)
        assert status == 400 and field in violations(body), body
        assert ok(rest, "GET", "/api/settings/qdrant") == before

    saved = ok(rest, "PUT", "/api/settings/qdrant", {"apiKey": QDRANT_KEY})
    assert saved["hasApiKey"] is True and saved["apiKeyMasked"] == "***9012"
    got = ok(rest, "GET", "/api/settings/qdrant")
    assert QDRANT_KEY not in str(saved) and QDRANT_KEY not in str(got) and "apiKey" not in got
    assert ok(rest, "PUT", "/api/settings/qdrant", {"apiKey": ""})["hasApiKey"] is False

    on = ok(rest, "PUT", "/api/settings/qdrant", {"enabled": True, "localPath": ":memory:"})
    assert on["enabled"] is True
    assert ok(rest, "GET", "/api/settings/memory")["vectorStore"] == "qdrant"
    health = ok(rest, "GET", "/api/settings/qdrant/health")
    assert health["ok"] is True and health["latencyMs"] > 0 and health["mode"] == "local"
    assert ok(rest, "GET", "/api/memory/engine-status")["qdrant"]["healthy"] is True

    memory_id = create(rest, "key-rest-qdrant", EDITOR)
    deadline = time.monotonic() + 20
    while True:
        found = ok(
            rest,
            "POST",
            "/api/settings/qdrant/search",
            {"query": "editor theme", "apiKeyId": "key-rest-qdrant", "topK": 3},
        )
        if found["results"] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert [r["id"] for r in found["results"]] == [memory_id] and found["results"][0]["apiKeyId"] == "key-rest-qdrant"
    status, body = rest.call("POST", "/api/settings/qdrant/search", {"query": "x", "topK": 50})
    assert status == 400 and "topK" in violations(body)
    cleaned = ok(rest, "POST", "/api/settings/qdrant/cleanup", {})
    assert cleaned == {"success": True, "deletedCount": 0}

    off = ok(rest, "PUT", "/api/settings/qdrant", {"enabled": False})
    assert off["enabled"] is False
    assert ok(rest, "GET", "/api/settings/memory")["vectorStore"] == "auto"


# ---- the URL policy (last: a refused URL must leave the settings as they were) -------------------


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("http://user:hunter2pw@127.0.0.1:9/v1", id="credentials"),
        pytest.param("http://127.0.0.1:9/v1?token=hunter2pw", id="query-string"),
        pytest.param("file:///etc/passwd", id="file-scheme"),
        pytest.param("http://169.254.169.254/", id="metadata-address"),
        pytest.param("http://2852039166/", id="name-resolving-to-link-local"),
        pytest.param("http://0177.0.0.1:9/v1", id="octal-ipv4"),
        pytest.param("http://1.2.3.04/v1", id="leading-zero-ipv4"),
        pytest.param("http://" + "a" * 64 + ".example.com/v1", id="dns-label-over-63"),
        pytest.param("http://100.100.100.200/", id="alibaba-metadata"),
        pytest.param("http://[64:ff9b::a9fe:a9fe]/", id="nat64-metadata"),
        pytest.param("http://[::169.254.169.254]/", id="ipv4-compatible-metadata"),
    ],
)
def test_a_forbidden_custom_base_url_is_400_and_nothing_is_stored(rest, models, url):
    use_remote(rest, models)
    before = ok(rest, "GET", "/api/settings/memory")
    try:
        status, body = rest.call(
            "PUT",
            "/api/settings/memory",
            {"embeddingSource": "remote", "customBaseUrl": url, "customModelId": "other-model"},
        )
        assert status == 400 and "customBaseUrl" in violations(body), (status, body)
        assert "hunter2pw" not in str(body)
        assert ok(rest, "GET", "/api/settings/memory") == before
    finally:
        use_remote(rest, models)
