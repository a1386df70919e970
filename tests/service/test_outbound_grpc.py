"""Endpoints a setting names, through the real gRPC server: a URL the HTTP client cannot use
exactly as checked is refused on write (400 naming the field, nothing saved); one stored
anyway (by an older version) never fails a create, retrieve or inject — they fall back and
say why; every spelling of a metadata address is refused; the Qdrant folder stays inside the
data directory; the Qdrant readiness probe ignores proxy variables."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memsvc.storage.settings_store import SqliteSettingsStore
from memsvc.v1 import engine_pb2 as epb
from memsvc.v1 import settings_pb2 as spb
from tests.support.http_recorder import Recorder
from tests.support.vectors import (
    C,
    create,
    error,
    models,  # noqa: F401 - fixture
    preview,
    set_memory,
    set_qdrant,
    sql,
    status,
    struct,
    violated_fields,
    warm,
)

pytestmark = [pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection:UserWarning")]

UNUSABLE = [
    "http://0177.0.0.1:9",
    "http://1.2.3.04",
    "http://00.0.0.0",
    "http://127.1:9/v1",
    "http://2130706433/v1",
    "http://" + "a" * 64 + ".example.com/v1",
    "http://a..b/v1",
]
METADATA = [
    "http://100.100.100.200/latest/meta-data/",
    "http://[::169.254.169.254]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2002:a9fe:a9fe::]/",
    "http://[::ffff:0:a9fe:a9fe]/",
    "http://[fd00:ec2::23]/",
    "http://instance-data.ec2.internal/",
    "http://x.metadata.google.internal/",
]


def memory_settings(stubs) -> spb.MemorySettings:
    return stubs.settings.GetMemorySettings(spb.GetMemorySettingsRequest())


@pytest.mark.parametrize("url", UNUSABLE + METADATA)
def test_a_custom_base_url_the_client_cannot_use_as_checked_is_refused_on_write(stubs, url):
    err = error(
        stubs.settings.UpdateMemorySettings,
        spb.UpdateMemorySettingsRequest(settings=struct({"customBaseUrl": url, "customModelId": "m"})),
    )
    assert err.code() == C.INVALID_ARGUMENT
    assert violated_fields(err) == {"customBaseUrl"}
    assert url not in (err.details() or "")
    saved = memory_settings(stubs)
    assert not saved.HasField("custom_base_url") and not saved.HasField("custom_model_id")


@pytest.mark.parametrize(
    "url", ["http://0177.0.0.1:9", "http://1.2.3.04", "http://00.0.0.0", "http://" + "a" * 64 + ".example.com/v1"]
)
def test_a_stored_unusable_url_never_fails_a_write_or_a_retrieval(server, stubs, url):
    """Stored as an older version accepted it: every request still answers, with keyword
    search, and says why the embedding source is not used."""
    SqliteSettingsStore(server.app.database).write_settings(
        "memory", {"enabled": True, "embeddingSource": "remote", "customBaseUrl": url, "customModelId": "m"}
    )
    created = create(stubs, "key-bad-url", "I prefer dark mode in my editor")
    hot = stubs.engine.Retrieve(epb.RetrieveRequest(api_key_id="key-bad-url", query="dark mode", strategy="hybrid"))
    assert [m.id for m in hot.memories] == [created]
    shown = preview(stubs, "dark mode", "key-bad-url", strategy="semantic")
    assert [m.id for m in shown.memories] == [created]
    assert "customBaseUrl" in shown.resolution.fallback_reason
    injected = stubs.engine.Inject(
        epb.InjectRequest(
            request=struct({"model": "gpt-4o", "messages": [{"role": "user", "content": "dark mode?"}]}),
            provider="openai",
            api_key_id="key-bad-url",
        )
    )
    assert injected.injected and list(injected.memory_ids) == [created]
    st = status(stubs)
    assert not st.embedding.available and "customBaseUrl" in st.embedding.reason


def test_a_host_name_is_resolved_and_reached_through_the_pinned_connection(server, stubs, models):
    """A name, not an address: the pinned connection resolves `localhost` itself, checks the
    answer and connects to it; embeddings, the vector table and semantic search all work."""
    set_memory(
        stubs,
        enabled=True,
        embeddingSource="remote",
        customBaseUrl=f"http://localhost:{models.port}/v1",
        customModelId="minilm",
    )
    warm(server)
    created = create(stubs, "key-localhost", "I prefer dark mode in my editor")
    create(stubs, "key-localhost", "My cat is called Miso")
    shown = preview(stubs, "What editor theme do I like?", "key-localhost", strategy="semantic")
    assert shown.resolution.strategy_used == "vector" and shown.resolution.fallback_reason == ""
    assert shown.memories[0].id == created and models.embed_calls >= 2


def test_an_answer_that_breaks_the_embedding_source_never_fails_a_write_or_a_retrieval(server, stubs):
    """A number too large for a float32 makes numpy raise OverflowError while the answer is
    read: not an error class the source expects. The write is kept (marked for reindexing)
    and the retrieval falls back to keywords, saying why."""
    with Recorder() as endpoint:
        endpoint.answer = b'{"data": [{"index": 0, "embedding": [1' + b"0" * 400 + b"]}]}"
        set_memory(
            stubs,
            enabled=True,
            embeddingSource="remote",
            customBaseUrl=f"http://127.0.0.1:{endpoint.port}/v1",
            customModelId="m",
        )
        created = create(stubs, "key-overflow", "I prefer dark mode in my editor")
        shown = preview(stubs, "dark mode", "key-overflow", strategy="semantic")
        assert [m.id for m in shown.memories] == [created]
        assert "OverflowError" in shown.resolution.fallback_reason
        hot = stubs.engine.Retrieve(
            epb.RetrieveRequest(api_key_id="key-overflow", query="dark mode", strategy="hybrid")
        )
        assert [m.id for m in hot.memories] == [created]
        assert endpoint.paths.count("/v1/embeddings") >= 2
    assert sql(server, "SELECT needs_reindex FROM memories WHERE id = ?", (created,)) == [(1,)]


# ---- the Qdrant folder --------------------------------------------------------------------------


@pytest.fixture
def outside(tmp_path) -> Path:
    return tmp_path / "outside" / "qdrant"


def test_a_qdrant_local_path_outside_the_data_dir_is_refused_and_nothing_is_created(server, stubs, outside):
    data = server.config.data_dir
    outside.parent.mkdir()
    (data / "escape").symlink_to(outside.parent, target_is_directory=True)
    for path in (str(outside), "~/memsvc-qdrant", "escape/qdrant", str(data), str(data / "x" / ".." / "..")):
        err = error(
            stubs.settings.UpdateQdrantSettings,
            spb.UpdateQdrantSettingsRequest(settings=struct({"enabled": True, "localPath": path})),
        )
        assert err.code() == C.INVALID_ARGUMENT, path
        assert violated_fields(err) == {"localPath"}
    assert not outside.exists() and list(outside.parent.iterdir()) == []
    assert not stubs.settings.GetQdrantSettings(spb.GetQdrantSettingsRequest()).enabled
    assert memory_settings(stubs).vector_store == "auto"
    inside = data / "vectors" / "qdrant"
    assert set_qdrant(stubs, enabled=True, localPath=str(inside)).local_path == str(inside)
    assert status(stubs).qdrant.healthy and inside.is_dir()


def test_a_stored_qdrant_path_outside_the_data_dir_is_never_used(server, stubs, outside):
    SqliteSettingsStore(server.app.database).write_settings("qdrant", {"enabled": True, "localPath": str(outside)})
    SqliteSettingsStore(server.app.database).write_settings("memory", {"vectorStore": "qdrant"})
    st = status(stubs)
    assert st.qdrant.enabled and not st.qdrant.healthy and "data directory" in st.qdrant.error
    create(stubs, "key-q-out", "I prefer dark mode in my editor")  # writes still succeed
    assert not outside.exists() and not outside.parent.exists()


# ---- the Qdrant readiness probe -----------------------------------------------------------------


@pytest.fixture
def recorders() -> Iterator[tuple[Recorder, Recorder]]:
    with Recorder() as qdrant, Recorder() as proxy:
        yield qdrant, proxy


def test_the_qdrant_probe_ignores_proxy_variables(stubs, recorders, monkeypatch):
    qdrant, proxy = recorders
    # ALL_PROXY is read by httpx and not by gRPC, so the test's own channel is unaffected.
    for name in ("ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    set_qdrant(stubs, enabled=True, host="127.0.0.1", port=qdrant.port, apiKey="qd-key-never-to-a-proxy")
    probe = stubs.settings.CheckQdrantHealth(spb.CheckQdrantHealthRequest())
    assert probe.mode == "server"
    assert "/readyz" in qdrant.paths
    assert proxy.paths == []
