"""Remote embedding providers: a short catalog of known OpenAI-compatible `/embeddings`
services and their models, and which of them this server is configured for.

Configuration (memsvc/config.py): `MEMSVC_EMBEDDING_PROVIDERS` (`name=base_url,...`; a known
provider has a default base URL, so a key alone configures it) and
`MEMSVC_EMBEDDING_API_KEYS` (`name=key,...`). Keys are secrets: they are never logged, never
part of a repr, and the listing says only `has_key`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CatalogModel:
    name: str  # the id the provider expects in {"model": ...}
    dimensions: int  # of the vectors it returns when no `dimensions` parameter is sent


@dataclass(frozen=True)
class KnownProvider:
    name: str
    base_url: str  # OpenAI-compatible: POST {base_url}/embeddings
    models: tuple[CatalogModel, ...]  # the first is the default model
    rerank_models: tuple[str, ...] = ()  # POST {base}/v1/rerank


# Only services whose /embeddings endpoint takes {"model", "input"} and answers
# {"data": [{"index", "embedding"}]}, and only models whose native size is certain.
CATALOG: dict[str, KnownProvider] = {
    p.name: p
    for p in (
        KnownProvider(
            "openai",
            "https://api.openai.com/v1",
            (
                CatalogModel("text-embedding-3-small", 1536),
                CatalogModel("text-embedding-3-large", 3072),
                CatalogModel("text-embedding-ada-002", 1536),
            ),
        ),
        KnownProvider("mistral", "https://api.mistral.ai/v1", (CatalogModel("mistral-embed", 1024),)),
        KnownProvider(
            "voyage",
            "https://api.voyageai.com/v1",
            (
                CatalogModel("voyage-3", 1024),
                CatalogModel("voyage-3-lite", 512),
            ),
            rerank_models=("rerank-2", "rerank-2-lite"),
        ),
        KnownProvider(
            "together",
            "https://api.together.xyz/v1",
            (
                CatalogModel("BAAI/bge-large-en-v1.5", 1024),
                CatalogModel("BAAI/bge-base-en-v1.5", 768),
            ),
        ),
        KnownProvider("nebius", "https://api.tokenfactory.nebius.com/v1", (CatalogModel("BAAI/bge-en-icl", 4096),)),
    )
}


@dataclass(frozen=True)
class ProviderEndpoint:
    """One configured remote provider. `api_key` is kept out of repr and equality output."""

    name: str
    base_url: str
    api_key: str | None = field(default=None, repr=False)

    @property
    def has_key(self) -> bool:
        return bool(self.api_key)

    @property
    def models(self) -> tuple[CatalogModel, ...]:
        known = CATALOG.get(self.name)
        return known.models if known else ()

    def model(self, name: str) -> CatalogModel | None:
        return next((m for m in self.models if m.name == name), None)


class ProviderRegistry:
    """The configured providers: every name in MEMSVC_EMBEDDING_PROVIDERS, plus every known
    provider that has a key in MEMSVC_EMBEDDING_API_KEYS (its default base URL)."""

    def __init__(self, providers: Iterable[tuple[str, str]] = (), api_keys: Iterable[tuple[str, str]] = ()):
        keys = {name.strip().lower(): key for name, key in api_keys if key}
        endpoints: dict[str, ProviderEndpoint] = {}
        for name, base_url in providers:
            name = name.strip().lower()
            endpoints[name] = ProviderEndpoint(name, base_url.rstrip("/"), keys.get(name))
        for name in keys:
            if name not in endpoints and name in CATALOG:
                endpoints[name] = ProviderEndpoint(name, CATALOG[name].base_url, keys[name])
        self._endpoints = endpoints

    def __repr__(self) -> str:
        return f"ProviderRegistry({[(e.name, e.has_key) for e in self._endpoints.values()]})"

    def get(self, name: str) -> ProviderEndpoint | None:
        return self._endpoints.get(name.strip().lower())

    def configured(self) -> list[ProviderEndpoint]:
        return list(self._endpoints.values())

    def first_with_key(self) -> ProviderEndpoint | None:
        """The first configured provider with a key and a known default model (auto mode)."""
        return next((e for e in self._endpoints.values() if e.has_key and e.models), None)

    def listing(self) -> list[dict]:
        """ListEmbeddingProviders' remote part: `{provider, has_key, models}`, never a key."""
        return [
            {
                "provider": e.name,
                "has_key": e.has_key,
                "kind": "remote",
                "models": [{"id": f"{e.name}/{m.name}", "name": m.name, "dimensions": m.dimensions} for m in e.models],
            }
            for e in self._endpoints.values()
        ]


def split_provider_model(value: str | None) -> tuple[str, str] | None:
    """ "provider/model" → (provider, model); the model may itself contain "/" (BAAI/...)."""
    if not value:
        return None
    provider, _, model = value.strip().partition("/")
    return (provider.strip().lower(), model.strip()) if provider.strip() and model.strip() else None
