"""Qdrant settings (Get/UpdateQdrantSettings): lenient read, strict
write, write-only API key, and the vectorStore patch that goes with enabling/disabling."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from memsvc.core.settings.memory import Settings
from memsvc.core.settings.qdrant import (
    NAMESPACE,
    QdrantSettings,
    QdrantSettingsManager,
    mask_api_key,
    memory_settings_patch,
    normalize,
    validate_update,
)
from memsvc.kernel.errors import ValidationError
from memsvc.storage.database import Database
from memsvc.storage.migrations import apply_migrations
from memsvc.storage.settings_store import SqliteSettingsStore

KEY = "qd-secret-0123456789-wxyz"
DATA_DIR = Path("/srv/memsvc-data")  # never created: confinement is a check on paths


@pytest.fixture
def store(tmp_path: Path):
    db = Database(tmp_path / "settings.db")
    apply_migrations(db)
    yield SqliteSettingsStore(db)
    db.close()


@pytest.fixture
def manager(store) -> QdrantSettingsManager:
    return QdrantSettingsManager(store, DATA_DIR)


def _violations(patch) -> dict[str, str]:
    with pytest.raises(ValidationError) as info:
        validate_update(patch, DATA_DIR)
    return {v.field: v.description for v in info.value.violations}


def test_defaults(manager):
    assert manager.get().to_api() == {
        "enabled": False,
        "host": "localhost",
        "port": 6333,
        "collection": "omniroute_memory",
        "embeddingModel": "openai/text-embedding-3-small",
        "quantization": "none",
        "localPath": None,
        "hasApiKey": False,
        "apiKeyMasked": None,
    }


def test_api_key_is_write_only_and_masked(manager, store, caplog):
    caplog.set_level(logging.DEBUG)
    got = manager.update({"apiKey": KEY}).settings
    api = got.to_api()
    assert api["hasApiKey"] is True and api["apiKeyMasked"] == "***wxyz"
    assert "apiKey" not in api and KEY not in str(api) and KEY not in repr(got) and KEY not in repr(manager.get())
    assert got.api_key == KEY  # usable by the tier
    assert KEY not in caplog.text
    # Omitted: left alone (unless the server it is sent to changes). "" or null: removed.
    assert manager.update({"collection": "other"}).settings.api_key == KEY
    with pytest.raises(ValidationError) as moved:
        manager.update({"port": 6334})
    assert [v.field for v in moved.value.violations] == ["apiKey"] and manager.get().port == 6333
    assert manager.update({"port": 6334, "apiKey": KEY}).settings.api_key == KEY
    assert manager.update({"apiKey": ""}).settings.to_api()["hasApiKey"] is False
    manager.update({"apiKey": KEY})
    assert manager.update({"apiKey": None}).settings.api_key is None
    assert store.read_settings(NAMESPACE)["apiKey"] is None
    assert (mask_api_key("abcd1234"), mask_api_key("short"), mask_api_key(None)) == ("***1234", "***", None)


def test_violations_are_listed_together_and_nothing_is_saved(manager):
    with pytest.raises(ValidationError) as info:
        manager.update(
            {
                "port": 65536,
                "collection": "",
                "enabled": "yes",
                "quantization": "fp16",
                "bogus": 1,
                "host": "169.254.169.254",
                "apiKey": "has space " + KEY,
            }
        )
    found = {v.field: v.description for v in info.value.violations}
    assert set(found) == {"port", "collection", "enabled", "quantization", "bogus", "host", "apiKey"}
    assert "between 1 and 65535" in found["port"] and "empty" in found["collection"]
    assert KEY not in str(info.value)
    assert manager.get() == QdrantSettings()


@pytest.mark.parametrize(
    "patch, field",
    [
        ({"port": 0}, "port"),
        ({"port": 65536}, "port"),
        ({"port": 80.5}, "port"),
        ({"port": "6333"}, "port"),
        ({"collection": ""}, "collection"),
        ({"collection": "   "}, "collection"),
        ({"collection": "a/b"}, "collection"),
        ({"collection": "x" * 256}, "collection"),
        ({"host": ""}, "host"),
        ({"host": "http://u:p@h"}, "host"),
        ({"host": "metadata.google.internal"}, "host"),
        ({"host": "bad host"}, "host"),
        ({"host": "https://q.example.com/path"}, "host"),
        ({"embeddingModel": ""}, "embeddingModel"),
        ({"localPath": "../outside"}, "localPath"),
        ({"localPath": 5}, "localPath"),
        ({"apiKey": 5}, "apiKey"),
        ({}, "settings"),
        ({"hasApiKey": True}, "settings"),
    ],
)
def test_invalid_values(patch, field):
    assert field in _violations(patch)


def test_valid_values_are_saved(manager):
    saved = manager.update(
        {
            "enabled": True,
            "host": "qdrant.internal",
            "port": 65535,
            "collection": "Mem_2-x",
            "embeddingModel": "openai/text-embedding-3-large",
            "quantization": "binary",
            "localPath": "  vectors  ",
            "hasApiKey": False,
            "apiKeyMasked": "***",
        }
    ).settings
    assert (saved.enabled, saved.host, saved.port, saved.collection, saved.quantization, saved.local_path) == (
        True,
        "qdrant.internal",
        65535,
        "Mem_2-x",
        "binary",
        "vectors",
    )
    assert manager.update({"localPath": ""}).settings.local_path is None
    for host in ("10.0.0.5", "::1", "[::1]", "https://qdrant.example.com:6333", "q-1.example.com"):
        assert validate_update({"host": host}, DATA_DIR)["host"] == host


def test_lenient_read_of_stored_junk(store, manager):
    store.write_settings(
        NAMESPACE,
        {
            "enabled": "true",
            "port": 70000,
            "collection": "bad name",
            "quantization": "pq",
            "host": "",
            "apiKey": 42,
            "localPath": "../x",
            "embeddingModel": None,
        },
    )
    s = manager.get()
    assert (s.enabled, s.port, s.collection, s.quantization, s.host, s.api_key, s.local_path, s.embedding_model) == (
        True,
        65535,
        "omniroute_memory",
        "none",
        "localhost",
        None,
        None,
        "openai/text-embedding-3-small",
    )
    assert normalize({"port": "6334"}).port == 6334


def test_enabling_and_disabling_set_the_vector_store(store, manager):
    memory = Settings(store)
    assert memory.get().vector_store == "auto"
    update = manager.update({"enabled": True})
    assert update.memory_patch == {"vectorStore": "qdrant"} and update.settings.enabled
    assert memory.update(update.memory_patch).vector_store == "qdrant"
    update = manager.update({"enabled": False})
    assert update.memory_patch == {"vectorStore": "auto"} and not update.settings.enabled
    assert memory.update(update.memory_patch).vector_store == "auto"
    assert manager.update({"port": 7000}).memory_patch == {}
    assert memory_settings_patch({"enabled": True}) == {"vectorStore": "qdrant"}


def test_local_path_and_server_url(tmp_path: Path):
    assert QdrantSettings(local_path="q").resolved_local_path(tmp_path) == str(tmp_path / "q")
    assert QdrantSettings(local_path=str(tmp_path / "abs" / "q")).resolved_local_path(tmp_path) == str(
        tmp_path / "abs" / "q"
    )
    assert QdrantSettings(local_path=":memory:").resolved_local_path(tmp_path) == ":memory:"
    assert QdrantSettings().resolved_local_path(tmp_path) is None
    assert QdrantSettings().server_url() == "http://localhost:6333"
    assert QdrantSettings(host="::1", port=7000).server_url() == "http://[::1]:7000"
    assert QdrantSettings(host="https://q.example.com").server_url() == "https://q.example.com:6333"
    assert QdrantSettings(host="https://q.example.com:443").server_url() == "https://q.example.com:443"


# ---- localPath stays inside the data directory -------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/anywhere/qdrant",
        "~/qdrant",
        "~",
        "../outside",
        "q/../../outside",
        "/srv/memsvc-data/../elsewhere",
        "/srv/memsvc-data",
        ".",
        "/srv/memsvc-data-2/q",
    ],
)
def test_a_local_path_outside_the_data_dir_is_refused(path):
    assert "data directory" in _violations({"enabled": True, "localPath": path})["localPath"]


@pytest.mark.parametrize(
    "path, expected",
    [("qdrant", "qdrant"), ("/srv/memsvc-data/vectors/q", "/srv/memsvc-data/vectors/q"), (":memory:", ":memory:")],
)
def test_a_local_path_inside_the_data_dir_is_accepted(path, expected):
    assert validate_update({"localPath": path}, DATA_DIR)["localPath"] == expected


def test_a_link_out_of_the_data_dir_is_refused_on_write_and_on_use(tmp_path: Path, store):
    data, outside = tmp_path / "data", tmp_path / "outside"
    data.mkdir()
    outside.mkdir()
    (data / "link").symlink_to(outside)
    with pytest.raises(ValidationError) as info:
        validate_update({"localPath": "link/qdrant"}, data)
    assert info.value.violations[0].field == "localPath"
    # A value stored before the rule (or a link planted after the write) is refused on use.
    with pytest.raises(ValueError, match="inside the data directory"):
        QdrantSettings(local_path="link/qdrant").resolved_local_path(data)
    with pytest.raises(ValueError, match="inside the data directory"):
        QdrantSettings(local_path="/anywhere/qdrant").resolved_local_path(data)
    assert not (outside / "qdrant").exists()
