"""Which source the settings select and why, signatures, the provider listing, engine
status, and the configuration options behind them. Resolution never loads a model or
calls out, so these tests are fast; the one that embeds uses the loopback stand-in."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from memsvc import config as config_module
from memsvc.config import ConfigError
from memsvc.core.settings.memory import MemorySettings
from memsvc.embedding import NoEmbeddingSource
from memsvc.embedding.providers import CATALOG, ProviderRegistry, split_provider_model
from memsvc.embedding.resolver import EmbeddingConfig, Embeddings
from memsvc.embedding.sources import RemoteSource, StaticSource, TransformersSource, default_static_cache_dir
from tests.support.model_server import shared

KEY = "test-key-123"
SECRET = "sk-very-SECRET-openai-key"


@pytest.fixture
def server():
    s = shared(KEY)
    s.reset()
    yield s
    s.reset()


def make(tmp_path: Path, **config) -> Embeddings:
    return Embeddings(EmbeddingConfig(static_cache_dir=tmp_path / "embeddings", **config))


AUTO = MemorySettings()


# -- auto ---------------------------------------------------------------------------------


def test_auto_with_nothing_enabled_is_keyword_only(tmp_path):
    resolved = make(tmp_path).resolve(AUTO)
    assert resolved.source is None and resolved.signature is None and resolved.name == "none"
    assert resolved.reason.startswith("auto: no embedding source, keyword search only")
    assert "staticEnabled is false" in resolved.reason and "transformersEnabled is false" in resolved.reason


def test_auto_picks_static_when_enabled(tmp_path):
    resolved = make(tmp_path).resolve(replace(AUTO, static_enabled=True, transformers_enabled=True))
    assert isinstance(resolved.source, StaticSource)
    assert resolved.reason.startswith("auto: static")
    assert "distilled once" in resolved.reason  # nothing is cached in this fresh folder yet
    assert not resolved.source.loaded


def test_auto_picks_transformers_when_only_it_is_enabled(tmp_path):
    resolved = make(tmp_path).resolve(replace(AUTO, transformers_enabled=True))
    assert isinstance(resolved.source, TransformersSource)
    assert resolved.reason.startswith("auto: transformers")
    assert "staticEnabled is false" in resolved.reason
    assert resolved.signature == "transformers:all-MiniLM-L6-v2:384"  # from the model's files
    assert not resolved.source.loaded  # resolving never loads the model


def test_auto_prefers_a_provider_with_a_key(tmp_path):
    embeddings = make(tmp_path, api_keys=(("openai", SECRET),))
    resolved = embeddings.resolve(replace(AUTO, static_enabled=True))
    assert isinstance(resolved.source, RemoteSource)
    assert resolved.source.model == "text-embedding-3-small"
    assert resolved.source.base_url == "https://api.openai.com/v1"
    assert "openai" in resolved.reason and resolved.reason.startswith("auto: remote")
    assert resolved.signature is None  # not known until the first answer
    assert SECRET not in resolved.reason and SECRET not in repr(resolved.source)


def test_auto_uses_the_named_provider_and_model(tmp_path):
    embeddings = make(tmp_path, api_keys=(("openai", SECRET), ("mistral", "mk")))
    resolved = embeddings.resolve(replace(AUTO, embedding_provider_model="mistral/mistral-embed"))
    assert resolved.source.label == "mistral" and resolved.source.model == "mistral-embed"


def test_auto_skips_a_named_provider_without_a_key(tmp_path):
    embeddings = make(tmp_path, providers=(("openai", "https://api.openai.com/v1"),))
    resolved = embeddings.resolve(
        replace(AUTO, embedding_provider_model="openai/text-embedding-3-small", static_enabled=True)
    )
    assert isinstance(resolved.source, StaticSource)
    assert "provider openai has no API key" in resolved.reason


def test_auto_ignores_a_keyed_provider_with_no_known_model_unless_named(tmp_path, server):
    embeddings = make(tmp_path, providers=(("local", server.base_url),), api_keys=(("local", KEY),))
    assert embeddings.resolve(AUTO).source is None
    named = embeddings.resolve(replace(AUTO, embedding_provider_model="local/all-MiniLM-L6-v2"))
    assert isinstance(named.source, RemoteSource) and named.source.model == "all-MiniLM-L6-v2"


def test_auto_uses_custom_base_url_and_model_id(tmp_path, server):
    settings = replace(AUTO, custom_base_url=server.base_url, custom_model_id="all-MiniLM-L6-v2", static_enabled=True)
    resolved = make(tmp_path).resolve(settings)
    assert isinstance(resolved.source, RemoteSource)
    assert "customBaseUrl" in resolved.reason
    assert not resolved.source.has_key  # a server key is never sent to a settings-chosen URL


def test_custom_url_needs_both_fields(tmp_path, server):
    resolved = make(tmp_path).resolve(replace(AUTO, custom_base_url=server.base_url))
    assert resolved.source is None
    assert "customModelId is empty" in resolved.reason


# -- explicit sources ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, reason",
    [
        ("static", "embeddingSource is static but staticEnabled is false"),
        ("transformers", "embeddingSource is transformers but transformersEnabled is false"),
        ("remote", "embeddingSource is remote but no provider with an API key is configured"),
    ],
)
def test_explicit_source_not_enabled_gives_none_with_the_reason(tmp_path, source, reason):
    resolved = make(tmp_path).resolve(replace(AUTO, embedding_source=source))
    assert resolved.source is None
    assert resolved.reason.startswith(reason)


def test_explicit_static_with_a_static_model_that_is_not_a_folder(tmp_path):
    embeddings = make(tmp_path, static_model="minishlab/potion-base-8M")
    resolved = embeddings.resolve(replace(AUTO, embedding_source="static", static_enabled=True))
    assert resolved.source is None
    assert "not a local model folder" in resolved.reason


def test_explicit_transformers_with_a_model_that_is_not_a_folder(tmp_path):
    embeddings = make(tmp_path, transformers_model=str(tmp_path / "missing"))
    resolved = embeddings.resolve(replace(AUTO, embedding_source="transformers", transformers_enabled=True))
    assert resolved.source is None and "not a local model folder" in resolved.reason


def test_explicit_remote_with_an_unconfigured_provider(tmp_path):
    resolved = make(tmp_path).resolve(
        replace(AUTO, embedding_source="remote", embedding_provider_model="voyage/voyage-3")
    )
    assert resolved.source is None
    assert "provider voyage (embeddingProviderModel) is not configured" in resolved.reason


def test_explicit_remote_refuses_a_bad_custom_url(tmp_path):
    settings = replace(
        AUTO, embedding_source="remote", custom_base_url="http://169.254.169.254/v1", custom_model_id="m"
    )
    resolved = make(tmp_path).resolve(settings)
    assert resolved.source is None and "link-local" in resolved.reason


def test_no_source_embed_raises_with_the_reason(tmp_path):
    with pytest.raises(NoEmbeddingSource) as info:
        make(tmp_path).embed(AUTO, ["x"])
    assert "keyword search only" in str(info.value)
    assert info.value.resolved.source is None


# -- reuse and signatures -----------------------------------------------------------------


def test_sources_are_created_once_per_configuration(tmp_path):
    embeddings = make(tmp_path, api_keys=(("openai", SECRET),))
    static = replace(AUTO, embedding_source="static", static_enabled=True)
    assert embeddings.resolve(static).source is embeddings.resolve(static).source
    remote_a = replace(AUTO, embedding_source="remote", embedding_provider_model="openai/text-embedding-3-small")
    remote_b = replace(remote_a, embedding_provider_model="openai/text-embedding-3-large")
    assert embeddings.resolve(remote_a).source is embeddings.resolve(remote_a).source
    assert embeddings.resolve(remote_a).source is not embeddings.resolve(remote_b).source


def test_remote_signature_appears_after_the_first_embedding(tmp_path, server):
    embeddings = make(tmp_path, providers=(("local", server.base_url),), api_keys=(("local", KEY),))
    settings = replace(AUTO, embedding_source="remote", embedding_provider_model="local/all-MiniLM-L6-v2")
    assert embeddings.resolve(settings).signature is None
    resolved, matrix = embeddings.embed(settings, ["first"])
    assert matrix.shape == (1, 384)
    assert resolved.signature == "remote:all-MiniLM-L6-v2:384"
    assert embeddings.resolve(settings).signature == "remote:all-MiniLM-L6-v2:384"
    status = embeddings.status(settings)
    assert status.dimensions == 384 and status.available is True and status.state == "ready"


def test_int8_quantization_is_part_of_the_signature(tmp_path):
    settings = replace(AUTO, transformers_enabled=True)
    assert make(tmp_path).resolve(settings).signature == "transformers:all-MiniLM-L6-v2:384"
    assert (
        make(tmp_path, vec_quantization="int8").resolve(settings).signature == "transformers:all-MiniLM-L6-v2:384:int8"
    )


def test_static_signature_is_none_until_the_model_exists(tmp_path):
    resolved = make(tmp_path).resolve(replace(AUTO, static_enabled=True))
    assert resolved.signature is None and resolved.dimensions is None


# -- status and providers -----------------------------------------------------------------


def test_status_reports_the_resolution_and_cache_without_loading(tmp_path):
    embeddings = make(tmp_path)
    none = embeddings.status(AUTO)
    assert none.source == "none" and none.available is False and none.model is None and none.state == "none"
    assert none.cache_stats == {"hits": 0, "misses": 0, "size": 0}
    status = embeddings.status(replace(AUTO, transformers_enabled=True))
    assert status.source == "transformers" and status.model == "all-MiniLM-L6-v2"
    # Known without loading, but it cannot answer before it loads: not available yet.
    assert status.dimensions == 384 and status.state == "not_loaded"
    assert status.available is False and status.loaded is False and "loads on first use" in status.reason


def test_status_reports_a_failing_remote_without_its_key(tmp_path, server):
    embeddings = make(tmp_path, providers=(("local", server.base_url),), api_keys=(("local", SECRET),))
    settings = replace(AUTO, embedding_source="remote", embedding_provider_model="local/all-MiniLM-L6-v2")
    with pytest.raises(Exception):
        embeddings.embed(settings, ["x"])  # the server wants another key: 401
    status = embeddings.status(settings)
    assert status.available is False and status.state == "failed" and "401" in status.reason
    assert SECRET not in str(status)


def test_providers_lists_configured_remotes_with_has_key_and_local_sources(tmp_path):
    embeddings = make(tmp_path, providers=(("local", "http://127.0.0.1:9/v1"),), api_keys=(("openai", SECRET),))
    listing = embeddings.providers()
    by_name = {p["provider"]: p for p in listing}
    assert SECRET not in str(listing)
    assert by_name["local"]["has_key"] is False and by_name["local"]["models"] == []
    openai = by_name["openai"]
    assert openai["has_key"] is True
    assert {"id": "openai/text-embedding-3-small", "name": "text-embedding-3-small", "dimensions": 1536} in openai[
        "models"
    ]
    assert {"id": "openai/text-embedding-3-large", "name": "text-embedding-3-large", "dimensions": 3072} in openai[
        "models"
    ]
    assert by_name["transformers"]["models"] == [
        {"id": "transformers/all-MiniLM-L6-v2", "name": "all-MiniLM-L6-v2", "dimensions": 384}
    ]
    assert by_name["static"]["has_key"] is False
    assert by_name["static"]["models"][0]["dimensions"] == 256
    assert "mistral" not in by_name  # known but not configured


def test_catalog_facts():
    dims = {(p, m.name): m.dimensions for p, k in CATALOG.items() for m in k.models}
    assert dims[("openai", "text-embedding-3-small")] == 1536
    assert dims[("openai", "text-embedding-ada-002")] == 1536
    assert dims[("mistral", "mistral-embed")] == 1024
    assert dims[("voyage", "voyage-3")] == 1024 and dims[("voyage", "voyage-3-lite")] == 512


def test_registry_keys_stay_out_of_reprs():
    registry = ProviderRegistry((), (("openai", SECRET),))
    assert SECRET not in repr(registry) and SECRET not in repr(registry.get("openai"))
    assert registry.get("OpenAI").has_key


def test_split_provider_model_keeps_slashes_in_the_model():
    assert split_provider_model("together/BAAI/bge-large-en-v1.5") == ("together", "BAAI/bge-large-en-v1.5")
    assert split_provider_model("openai/") is None and split_provider_model(None) is None


# -- configuration ------------------------------------------------------------------------


def test_config_options_reach_the_embedding_config(tmp_path):
    cfg = config_module.load(
        env={
            "MEMSVC_DATA_DIR": str(tmp_path),
            "MEMSVC_EMBEDDING_PROVIDERS": "local=http://127.0.0.1:8000/v1, together=https://api.together.xyz/v1",
            "MEMSVC_EMBEDDING_API_KEYS": f"openai={SECRET},local=abc=def",
            "MEMORY_EMBEDDING_CACHE_TTL_MS": "1234",
            "MEMORY_EMBEDDING_CACHE_MAX": "7",
            "MEMORY_VEC_QUANTIZATION": "int8",
            "MEMORY_VEC_TOP_K": "15",
            "MEMORY_RRF_K": "30",
            "MEMORY_STATIC_MODEL": "",
            "MEMORY_TRANSFORMERS_MODEL": "/models/minilm",
        }
    )
    cfg.validate()
    assert SECRET not in repr(cfg)
    ec = EmbeddingConfig.from_config(cfg)
    assert ec.providers == (("local", "http://127.0.0.1:8000/v1"), ("together", "https://api.together.xyz/v1"))
    assert dict(ec.api_keys) == {"openai": SECRET, "local": "abc=def"}
    assert (ec.cache_ttl_ms, ec.cache_max, ec.vec_quantization) == (1234, 7, "int8")
    assert ec.static_model is None and ec.transformers_model == "/models/minilm"
    assert ec.static_cache_dir == default_static_cache_dir()  # per install, not per data dir
    assert (cfg.vec_top_k, cfg.rrf_k) == (15, 30)
    assert SECRET not in repr(ec)


def test_config_defaults():
    cfg = config_module.Config()
    assert (cfg.embedding_cache_ttl_ms, cfg.embedding_cache_max, cfg.vec_top_k, cfg.rrf_k, cfg.vec_quantization) == (
        300000,
        1000,
        20,
        60,
        "none",
    )
    assert EmbeddingConfig.from_config(cfg).static_cache_dir == default_static_cache_dir()
    explicit = config_module.load(env={"MEMORY_STATIC_CACHE_DIR": "/srv/models"})
    assert EmbeddingConfig.from_config(explicit).static_cache_dir == Path("/srv/models")


@pytest.mark.parametrize(
    "env, fragment",
    [
        ({"MEMORY_VEC_QUANTIZATION": "int4"}, "none or int8"),
        ({"MEMORY_EMBEDDING_CACHE_MAX": "-1"}, "MEMORY_EMBEDDING_CACHE_MAX"),
        ({"MEMORY_EMBEDDING_CACHE_TTL_MS": "-5"}, "MEMORY_EMBEDDING_CACHE_TTL_MS"),
        ({"MEMORY_VEC_TOP_K": "0"}, "MEMORY_VEC_TOP_K"),
        ({"MEMORY_RRF_K": "0"}, "MEMORY_RRF_K"),
        ({"MEMSVC_EMBEDDING_PROVIDERS": "x=http://u:p@example.com/v1"}, "credentials"),
        ({"MEMSVC_EMBEDDING_PROVIDERS": "x=http://169.254.169.254/v1"}, "link-local"),
        ({"MEMSVC_EMBEDDING_API_KEYS": f"nowhere={SECRET}"}, "has no base URL"),
    ],
)
def test_config_validation_refuses_bad_values_without_echoing_keys(env, fragment):
    with pytest.raises(ConfigError) as info:
        config_module.load(env=env).validate()
    assert fragment in str(info.value)
    assert SECRET not in str(info.value)


def test_malformed_key_list_is_refused_without_echoing_it():
    with pytest.raises(ConfigError) as info:
        config_module.load(env={"MEMSVC_EMBEDDING_API_KEYS": SECRET})
    assert SECRET not in str(info.value) and "name=value" in str(info.value)


def test_config_knows_the_same_providers_as_the_catalog(tmp_path):
    for name in CATALOG:  # a key alone configures a known provider
        config_module.load(env={"MEMSVC_EMBEDDING_API_KEYS": f"{name}=k"}).validate()
