"""Settings: lenient normalization on read, strict validation on write."""

from __future__ import annotations

import pytest

from memsvc.core.settings.memory import SPECS, MemorySettings, Settings, normalize, validate_update
from memsvc.kernel.errors import ValidationError


def test_defaults_cover_every_field_of_the_spec():
    api = MemorySettings().to_api()
    assert api == {
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
        "fallbackBackends": (),
        "backendConfigs": {},
        "dedupOnWrite": True,
    }


def test_normalization_of_stored_junk():
    s = normalize(
        {
            "enabled": "yes",
            "maxTokens": 20001,
            "retentionDays": 0,
            "strategy": "exact",
            "scope": "planet",
            "customModelId": "",
            "fallbackBackends": "sqlite",
            "backendConfigs": [1],
        }
    )
    assert (s.enabled, s.max_tokens, s.retention_days, s.strategy, s.scope) == (True, 16000, 0, "recent", "apiKey")
    assert s.custom_model_id is None and s.fallback_backends == () and s.backend_configs == {}
    assert normalize({"maxTokens": "1999.6", "retentionDays": float("nan")}).max_tokens == 2000
    assert normalize({"retentionDays": float("nan")}).retention_days == 30


def _violations(patch):
    with pytest.raises(ValidationError) as info:
        validate_update(patch)
    return {v.field: v.description for v in info.value.violations}


def test_strict_write_lists_every_violation():
    found = _violations(
        {
            "maxTokens": 20001,
            "enabled": "yes",
            "bogus": 1,
            "strategy": "x",
            "retentionDays": 1.5,
            "fallbackBackends": ["qdrant-cloud"],
            "embeddingProviderModel": "no-slash",
        }
    )
    assert set(found) == {
        "maxTokens",
        "enabled",
        "bogus",
        "strategy",
        "retentionDays",
        "fallbackBackends",
        "embeddingProviderModel",
    }
    assert "between 0 and 16000" in found["maxTokens"] and "unknown" in found["bogus"]


@pytest.mark.parametrize(
    "url",
    [
        "http://user:s3cr3t@example.com/v1",
        "https://example.com/v1?key=1",
        "file:///etc/passwd",
        "http://169.254.169.254/latest",
        "http://[fe80::1]/",
        "http://metadata.google.internal/",
        "ftp://example.com",
        "http://",
        "https://example.com/v1#frag",
    ],
)
def test_custom_base_url_policy(url):
    assert "customBaseUrl" in _violations({"customBaseUrl": url})
    assert "s3cr3t" not in str(_violations({"customBaseUrl": url}))  # a secret in the URL is never echoed


def test_valid_update_and_empty_string_is_null():
    assert validate_update({"maxTokens": 0, "customBaseUrl": "https://api.example.com/v1", "customModelId": ""}) == {
        "maxTokens": 0,
        "customBaseUrl": "https://api.example.com/v1",
        "customModelId": None,
    }


class _Store:
    def __init__(self):
        self.values, self.version, self.reads = {}, 0, 0

    def read_settings(self, namespace):
        self.reads += 1
        return dict(self.values)

    def write_settings(self, namespace, values):
        self.values.update(values)
        self.version += 1

    def settings_version(self):
        return self.version


def test_cache_is_invalidated_by_a_version_change_from_elsewhere():
    store = _Store()
    settings = Settings(store)
    assert settings.get().enabled is False and settings.get().enabled is False
    assert store.reads == 1
    store.values["enabled"] = True  # another process writes
    store.version += 1
    assert settings.get().enabled is True and store.reads == 2


def test_every_spec_field_has_an_api_name():
    assert len({s.api for s in SPECS}) == len(SPECS) == len(MemorySettings().to_api())
